package smkey

import (
	"context"
	"crypto"
	"io"

	"github.com/emmansun/gmsm/sm2"
)

type countingSigner struct {
	*sm2.PrivateKey
	calls int
}

func (s *countingSigner) SignContext(ctx context.Context, r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	s.calls++
	return s.PrivateKey.Sign(r, d, o)
}
