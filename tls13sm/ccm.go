package tls13sm

import (
	"crypto/cipher"
	"crypto/subtle"
	"errors"

	"github.com/gmproxy/gmproxy/internal/sm4ecb"
)

// sm4CCM is AEAD_SM4_CCM of RFC 8998 §3.5.2 (CCM of RFC 3610 / NIST SP
// 800-38C with a 12-byte nonce, q = 3, and a 16-byte tag) written for the
// record layer: it works in place and allocates nothing. gmsm's
// cipher.NewCCM is the reference it is tested against; it is not used on
// the record path because its Seal computes the tag over the output buffer
// (wrong when sealing in place) and it allocates a CTR stream per call.
type sm4CCM struct {
	b       cipher.Block
	one     *sm4ecb.Single // single blocks; see encryptBlock
	blocks  multiBlock     // nil when the block has no batched encryption
	batch   int
	ctr     []byte // batch counter blocks
	stream  []byte // batch key-stream blocks
	mac, s0 [16]byte
	tmp     [16]byte
}

type multiBlock interface {
	EncryptBlocks(dst, src []byte)
	Concurrency() int
}

const (
	ccmNonceSize = 12
	ccmTagSize   = 16
	ccmMaxLen    = 1<<24 - 1 // q = 3 length octets
)

func newSM4CCM(b cipher.Block) *sm4CCM {
	c := &sm4CCM{b: b, one: sm4ecb.NewSingle(b), batch: 1}
	if mb, ok := b.(multiBlock); ok && mb.Concurrency() > 1 {
		c.blocks, c.batch = mb, mb.Concurrency()
	}
	c.ctr = make([]byte, 16*c.batch)
	c.stream = make([]byte, 16*c.batch)
	return c
}

// encryptBlock encrypts one block (dst may equal src). The CBC-MAC is serial,
// so it runs block by block; it goes through gmsm's ECB mode (a pass of its
// own, internal/sm4ecb) because on amd64 that uses the constant-time
// assembly, while cipher.Block.Encrypt uses a table implementation
// (protocol-notes §13.1) unless FORCE_SM4BLOCK_AESNI=1 is set.
func (c *sm4CCM) encryptBlock(dst, src []byte) {
	c.one.Encrypt(dst, src)
}

func (c *sm4CCM) NonceSize() int { return ccmNonceSize }
func (c *sm4CCM) Overhead() int  { return ccmTagSize }

// cbcMAC computes T of RFC 3610 §2.2 over (nonce, aad, msg) into c.mac.
func (c *sm4CCM) cbcMAC(nonce, msg, aad []byte) {
	x := &c.mac
	x[0] = (ccmTagSize-2)/2<<3 | (15 - ccmNonceSize - 1) // M', L'
	if len(aad) > 0 {
		x[0] |= 1 << 6
	}
	copy(x[1:], nonce)
	n := len(msg)
	x[13], x[14], x[15] = byte(n>>16), byte(n>>8), byte(n)
	c.encryptBlock(x[:], x[:])
	if len(aad) > 0 {
		// l(a) < 2^16 - 2^8: two length octets (the record header is 5 bytes).
		blk := &c.tmp
		*blk = [16]byte{}
		blk[0], blk[1] = byte(len(aad)>>8), byte(len(aad))
		k := copy(blk[2:], aad)
		subtle.XORBytes(x[:], x[:], blk[:])
		c.encryptBlock(x[:], x[:])
		c.macBlocks(aad[k:])
	}
	c.macBlocks(msg)
}

func (c *sm4CCM) macBlocks(p []byte) {
	x := &c.mac
	for len(p) >= 16 {
		subtle.XORBytes(x[:], x[:], p[:16])
		c.encryptBlock(x[:], x[:])
		p = p[16:]
	}
	if len(p) > 0 {
		subtle.XORBytes(x[:len(p)], x[:len(p)], p)
		c.encryptBlock(x[:], x[:])
	}
}

// setCounter writes A_i = flags || nonce || i (RFC 3610 §2.3).
func setCounter(a []byte, nonce []byte, i uint32) {
	a[0] = 15 - ccmNonceSize - 1
	copy(a[1:13], nonce)
	a[13], a[14], a[15] = byte(i>>16), byte(i>>8), byte(i)
}

// xorKeyStream XORs src with S_1, S_2, … into dst (dst may equal src).
func (c *sm4CCM) xorKeyStream(dst, src, nonce []byte) {
	i := uint32(1)
	for len(src) > 0 {
		n := c.batch
		if need := (len(src) + 15) / 16; need < n {
			n = need
		}
		for j := 0; j < n; j++ {
			setCounter(c.ctr[16*j:16*j+16], nonce, i)
			i++
		}
		if c.blocks != nil && n == c.batch {
			c.blocks.EncryptBlocks(c.stream, c.ctr)
		} else {
			for j := 0; j < n; j++ {
				c.encryptBlock(c.stream[16*j:16*j+16], c.ctr[16*j:16*j+16])
			}
		}
		k := subtle.XORBytes(dst, src, c.stream[:16*n])
		dst, src = dst[k:], src[k:]
	}
}

// tagMask computes S_0 = E(A_0) into c.s0.
func (c *sm4CCM) tagMask(nonce []byte) {
	setCounter(c.s0[:], nonce, 0)
	c.encryptBlock(c.s0[:], c.s0[:])
}

func sliceForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	return head, head[len(in):]
}

func (c *sm4CCM) Seal(dst, nonce, plaintext, aad []byte) []byte {
	if len(nonce) != ccmNonceSize || len(plaintext) > ccmMaxLen {
		panic("tls13sm: bad CCM nonce or message length")
	}
	c.cbcMAC(nonce, plaintext, aad) // before encrypting: dst may alias plaintext
	c.tagMask(nonce)
	ret, out := sliceForAppend(dst, len(plaintext)+ccmTagSize)
	c.xorKeyStream(out[:len(plaintext)], plaintext, nonce)
	subtle.XORBytes(out[len(plaintext):], c.mac[:], c.s0[:])
	return ret
}

var errCCMOpen = errors.New("tls13sm: CCM authentication failed")

func (c *sm4CCM) Open(dst, nonce, ciphertext, aad []byte) ([]byte, error) {
	if len(nonce) != ccmNonceSize || len(ciphertext) < ccmTagSize || len(ciphertext)-ccmTagSize > ccmMaxLen {
		return nil, errCCMOpen
	}
	n := len(ciphertext) - ccmTagSize
	var tag [ccmTagSize]byte
	copy(tag[:], ciphertext[n:])
	ret, out := sliceForAppend(dst, n)
	c.xorKeyStream(out, ciphertext[:n], nonce)
	c.cbcMAC(nonce, out, aad)
	c.tagMask(nonce)
	subtle.XORBytes(c.mac[:], c.mac[:], c.s0[:])
	if subtle.ConstantTimeCompare(c.mac[:], tag[:]) != 1 {
		clear(out)
		return nil, errCCMOpen
	}
	return ret, nil
}
