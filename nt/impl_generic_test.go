//go:build !amd64 || !gc || purego

package nt

func implementations() []impl {
	return []impl{{"generic", true, func() func() { return func() {} }}}
}
