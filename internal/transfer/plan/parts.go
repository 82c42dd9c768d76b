package plan

import "github.com/lightpath/lightpath/internal/transfer"

// BlockAlign is the mover's block size (mover.DefaultBlockSize, which
// data nodes push with): a part starts on a multiple of it, and every
// part but the last is a multiple of it long.
const BlockAlign = 4 << 20

// Parts cuts a file of size bytes into parts of partBytes each (rounded
// up to a multiple of BlockAlign, at least one block), the last taking
// the remainder, when size is at least minBytes; otherwise the file
// moves whole (nil). minBytes ≤ 0 or partBytes ≤ 0 never cuts; nor does
// a file that would make a single part.
func Parts(size, minBytes, partBytes int64) []transfer.Part {
	if minBytes <= 0 || partBytes <= 0 || size < minBytes {
		return nil
	}
	partBytes = (partBytes + BlockAlign - 1) / BlockAlign * BlockAlign
	if size <= partBytes {
		return nil
	}
	out := make([]transfer.Part, 0, (size+partBytes-1)/partBytes)
	for off := int64(0); off < size; off += partBytes {
		out = append(out, transfer.Part{Index: len(out), Offset: off, Length: min(partBytes, size-off)})
	}
	return out
}
