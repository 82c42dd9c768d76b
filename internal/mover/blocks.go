package mover

import (
	"maps"
	"slices"
)

// blockSet records which blocks of a file a receiver holds and their sums.
// Its memory grows with the blocks that arrive, never with the size a peer
// announces: state lives in pages allocated on first use, so a manifest
// entry claiming a terabyte costs nothing until a terabyte is sent.
type blockSet struct {
	adler bool
	pages map[uint32]*blockPage
	n     int // blocks held
}

const pageBlocks = 1024

type blockPage struct {
	have   [pageBlocks / 64]uint64
	crcs   [pageBlocks]uint32
	adlers []uint32 // only with adler32
}

func newBlockSet(adler bool) *blockSet { return &blockSet{adler: adler} }

func (b *blockSet) page(i uint32, create bool) *blockPage {
	p := b.pages[i/pageBlocks]
	if p == nil && create {
		if b.pages == nil {
			b.pages = map[uint32]*blockPage{}
		}
		p = &blockPage{}
		if b.adler {
			p.adlers = make([]uint32, pageBlocks)
		}
		b.pages[i/pageBlocks] = p
	}
	return p
}

// has says whether block i is held.
func (b *blockSet) has(i uint32) bool {
	p := b.page(i, false)
	return p != nil && p.have[i%pageBlocks/64]&(1<<(i%64)) != 0
}

// set records block i with its sums.
func (b *blockSet) set(i, crc, ad uint32) {
	p := b.page(i, true)
	k := i % pageBlocks
	if p.have[k/64]&(1<<(k%64)) == 0 {
		p.have[k/64] |= 1 << (k % 64)
		b.n++
	}
	p.crcs[k] = crc
	if p.adlers != nil {
		p.adlers[k] = ad
	}
}

// setAdler records block i's adler32 alone (checking an existing file).
func (b *blockSet) setAdler(i, ad uint32) {
	if b.adler {
		b.page(i, true).adlers[i%pageBlocks] = ad
	}
}

// count is the number of blocks held.
func (b *blockSet) count() int { return b.n }

// reset forgets every block.
func (b *blockSet) reset() {
	b.pages = nil
	b.n = 0
}

// each calls fn for every held block in index order.
func (b *blockSet) each(fn func(i, crc, ad uint32)) {
	for _, pi := range slices.Sorted(maps.Keys(b.pages)) {
		p := b.pages[pi]
		for k := uint32(0); k < pageBlocks; k++ {
			if p.have[k/64]&(1<<(k%64)) == 0 {
				continue
			}
			var ad uint32
			if p.adlers != nil {
				ad = p.adlers[k]
			}
			fn(pi*pageBlocks+k, p.crcs[k], ad)
		}
	}
}
