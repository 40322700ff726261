package history

// Operation is a client operation: its invoke event and its completion.
type Operation struct {
	Invoke Op
	// Complete is nil when the history ends before the operation completed
	// (the harness stopped); such an operation's outcome is unknown.
	Complete *Op
}

// Outcome is OK, Fail or Info; an operation that never completed is Info.
func (o *Operation) Outcome() Type {
	if o.Complete == nil {
		return Info
	}
	return o.Complete.Type
}

// End is the completion time, or end when the operation never completed.
func (o *Operation) End(end int64) int64 {
	if o.Complete == nil {
		return end
	}
	return o.Complete.Time
}

// Pair splits a history into client operations (in invoke order) and nemesis
// events. It assumes a history that passed Decode's validation.
func Pair(ops []Op) (operations []Operation, nemesis []Op) {
	open := map[int]int{} // process -> index in operations
	operations = make([]Operation, 0, len(ops)/2+1)
	for i := range ops {
		op := &ops[i]
		switch {
		case op.Process == NemesisProcess:
			nemesis = append(nemesis, *op)
		case op.Type == Summary, op.Type == Background:
			// counted failures, a lock's own renewals: not operations
		case op.Type == Invoke:
			open[op.Process] = len(operations)
			operations = append(operations, Operation{Invoke: *op})
		default:
			if j, ok := open[op.Process]; ok {
				operations[j].Complete = op
				delete(open, op.Process)
			}
		}
	}
	return operations, nemesis
}

// EndTime is the time of the last event, 0 for an empty history.
func EndTime(ops []Op) int64 {
	if len(ops) == 0 {
		return 0
	}
	return ops[len(ops)-1].Time
}
