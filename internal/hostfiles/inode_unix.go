//go:build unix

package hostfiles

import (
	"os"
	"syscall"
)

// inode is the file's inode number.
func inode(st os.FileInfo) uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Ino) //nolint:unconvert // uint32 on some systems
	}
	return 0
}
