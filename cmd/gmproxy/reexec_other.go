//go:build !unix

package main

import "errors"

func reexec(string, []string, []string) error { return errors.ErrUnsupported }
