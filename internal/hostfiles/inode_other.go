//go:build !unix

package hostfiles

import "os"

// inode is 0 where files have none: the agent runs on Linux only; this
// lets kustodian-ctl, which shares the package, build for Windows.
func inode(os.FileInfo) uint64 { return 0 }
