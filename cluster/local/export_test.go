package local

// SetLaunchHook makes f run each time the backend has created a process
// (with its node directory and PID) until the returned function is called.
// Tests filter on the directory: other tests may start clusters meanwhile.
func SetLaunchHook(f func(dir string, pid int)) (restore func()) {
	launchHook.Store(&f)
	return func() { launchHook.Store(nil) }
}
