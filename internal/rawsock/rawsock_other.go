//go:build !linux

package rawsock

const supported = false

func (c *Conn) doRead(fd uintptr) bool  { panic("rawsock: unsupported") }
func (c *Conn) doWrite(fd uintptr) bool { panic("rawsock: unsupported") }
func (c *Conn) doPeek(fd uintptr)       { panic("rawsock: unsupported") }
