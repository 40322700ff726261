package boundedread

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file within the bound reads whole; a larger one, and one that never
// ends, are refused after max+1 bytes.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(small, []byte("ttl: 500ms\n"), 0o644)
	os.WriteFile(big, []byte(strings.Repeat("#\n", 600)), 0o644)
	cases := []struct {
		path    string
		max     int64
		wantErr string
	}{
		{small, 100, ""},
		{big, 1000, "larger than 1000 bytes"},
		{big, 1200, ""},
		{"/dev/zero", MaxConfig, "larger than"},
		{filepath.Join(dir, "missing.yaml"), 100, "no such file"},
	}
	for _, tc := range cases {
		b, err := File(tc.path, tc.max)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.path, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want an error saying %q", tc.path, err, tc.wantErr)
		case tc.wantErr == "" && int64(len(b)) > tc.max:
			t.Errorf("%s: read %d bytes", tc.path, len(b))
		}
	}
}
