package mover

import (
	"maps"
	"slices"
)

// blockSet records which blocks of a file a receiver holds and their sums.
// Its memory grows with the blocks that arrive, never with the size a peer
// announces: state lives in pages allocated on first use, so a manifest
// entry claiming a terabyte costs nothing until a terabyte is sent. A hole
// costs a bit (its sums are those of zeros), so a stream of hole headers,
// 24 bytes each, cannot buy much memory either.
type blockSet struct {
	adler bool
	pages map[uint32]*blockPage
	n     int // blocks held
}

const pageBlocks = 1024

type blockPage struct {
	have   [pageBlocks / 64]uint64
	hole   [pageBlocks / 64]uint64
	crcs   []uint32 // allocated with the page's first data block
	adlers []uint32 // likewise, only with adler32
}

func newBlockSet(adler bool) *blockSet { return &blockSet{adler: adler} }

func (b *blockSet) page(i uint32, create bool) *blockPage {
	p := b.pages[i/pageBlocks]
	if p == nil && create {
		if b.pages == nil {
			b.pages = map[uint32]*blockPage{}
		}
		p = &blockPage{}
		b.pages[i/pageBlocks] = p
	}
	return p
}

func bit(set *[pageBlocks / 64]uint64, k uint32) bool { return set[k/64]&(1<<(k%64)) != 0 }

// has says whether block i is held.
func (b *blockSet) has(i uint32) bool {
	p := b.page(i, false)
	return p != nil && bit(&p.have, i%pageBlocks)
}

func (b *blockSet) mark(p *blockPage, k uint32, hole bool) {
	if !bit(&p.have, k) {
		p.have[k/64] |= 1 << (k % 64)
		b.n++
	}
	if hole {
		p.hole[k/64] |= 1 << (k % 64)
	} else {
		p.hole[k/64] &^= 1 << (k % 64)
	}
}

// set records data block i with its sums.
func (b *blockSet) set(i, crc, ad uint32) {
	p := b.page(i, true)
	k := i % pageBlocks
	b.mark(p, k, false)
	if p.crcs == nil {
		p.crcs = make([]uint32, pageBlocks)
		if b.adler {
			p.adlers = make([]uint32, pageBlocks)
		}
	}
	p.crcs[k] = crc
	if p.adlers != nil {
		p.adlers[k] = ad
	}
}

// setHole records block i as all zeros.
func (b *blockSet) setHole(i uint32) { b.mark(b.page(i, true), i%pageBlocks, true) }

// unset forgets block i.
func (b *blockSet) unset(i uint32) {
	p := b.page(i, false)
	k := i % pageBlocks
	if p == nil || !bit(&p.have, k) {
		return
	}
	p.have[k/64] &^= 1 << (k % 64)
	p.hole[k/64] &^= 1 << (k % 64)
	b.n--
}

// count is the number of blocks held.
func (b *blockSet) count() int { return b.n }

// reset forgets every block.
func (b *blockSet) reset() {
	b.pages = nil
	b.n = 0
}

// each calls fn for every held block in index order; for a hole, crc and
// ad are zero and hole is true.
func (b *blockSet) each(fn func(i, crc, ad uint32, hole bool)) {
	for _, pi := range slices.Sorted(maps.Keys(b.pages)) {
		p := b.pages[pi]
		for k := uint32(0); k < pageBlocks; k++ {
			if !bit(&p.have, k) {
				continue
			}
			if bit(&p.hole, k) {
				fn(pi*pageBlocks+k, 0, 0, true)
				continue
			}
			var ad uint32
			if p.adlers != nil {
				ad = p.adlers[k]
			}
			fn(pi*pageBlocks+k, p.crcs[k], ad, false)
		}
	}
}
