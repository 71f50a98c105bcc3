package render

import (
	"sync/atomic"
	"unsafe"
)

// Field values are kept once rendered, and responses share them: a
// client's fields repeat (the bucket's size, its remaining tokens, the
// seconds to the next one), so most responses find their values instead
// of rendering and allocating them. Owned here: a policy's tables, filled
// by any request, read by all without a lock.

// A value is one field's value and the one-element []string an
// http.Header holds for it. Both are shared by every response that sends
// it: a handler replaces a field (Header().Set), and must never write
// into its slice.
type value struct {
	a, b  int64 // what it renders (a field's numbers)
	field [1]string
	// The text itself, when it fits: a value is then one allocation.
	bytes [inlineBytes]byte
}

// inlineBytes holds the RateLimit value of a policy name of up to about
// 16 bytes, and every other field's value.
const inlineBytes = 40

// text is the value.
func (v *value) text() string { return v.field[0] }

// header is the value as an http.Header holds it.
func (v *value) header() []string { return v.field[:] }

// newValue keeps text as a value of its own: one allocation, or two for
// a text longer than inlineBytes.
func newValue(a, b int64, text []byte) *value {
	v := &value{a: a, b: b}
	if len(text) <= len(v.bytes) {
		n := copy(v.bytes[:], text)
		v.field[0] = unsafe.String(&v.bytes[0], n)
	} else {
		v.field[0] = string(text)
	}
	return v
}

// A valueTable keeps one field's values, direct-mapped by what they
// render: a slot holds the value rendered last for its index, and a
// value found in the wrong slot is rendered again. A miss costs one
// allocation (two for a text longer than inlineBytes); a hit none.
type valueTable struct {
	slots []atomic.Pointer[value]
}

// newValueTable has n slots, n a power of two.
func newValueTable(n int) valueTable {
	return valueTable{slots: make([]atomic.Pointer[value], n)}
}

// slot is where (a, b) is kept. b (the draft field's seconds, or a window)
// is usually one of a few numbers, a the one that varies.
func (t *valueTable) slot(a, b int64) *atomic.Pointer[value] {
	i := uint64(a) ^ uint64(b)*0x9e3779b97f4a7c15>>40
	return &t.slots[i&uint64(len(t.slots)-1)]
}

// find is the value kept for (a, b), or nil.
func (t *valueTable) find(a, b int64) *value {
	if v := t.slot(a, b).Load(); v != nil && v.a == a && v.b == b {
		return v
	}
	return nil
}

// keep makes text the value kept for (a, b), and returns it.
func (t *valueTable) keep(a, b int64, text []byte) *value {
	v := newValue(a, b, text)
	t.slot(a, b).Store(v)
	return v
}

// tables are a policy's values, one table per field it can send; a
// field the style does not send has no slots. The tables are held in
// place, so a lookup goes from the policy to its slot in two steps.
type tables struct {
	retryAfter valueTable // Retry-After: seconds
	policy     valueTable // RateLimit-Policy: (bucket size, window)
	limit      valueTable // RateLimit: (remaining, seconds to the next token)
	xLimit     valueTable // X-RateLimit-Limit: bucket size
	xRemaining valueTable // X-RateLimit-Remaining: remaining
	xReset     valueTable // X-RateLimit-Reset: Unix seconds
}

// Table sizes: a field that follows a bucket's remaining tokens gets room
// for a bucket of about a thousand; a bucket's size and window rarely
// change; the seconds of Retry-After and of a reset take a few values at
// a time.
const (
	remainingSlots = 1024
	fixedSlots     = 4
	secondsSlots   = 64
)

// newTables has the tables of style's fields.
func newTables(style Style) *tables {
	t := &tables{retryAfter: newValueTable(secondsSlots)}
	if style == Draft || style == Both {
		t.policy, t.limit = newValueTable(fixedSlots), newValueTable(remainingSlots)
	}
	if style == Legacy || style == Both {
		t.xLimit, t.xRemaining, t.xReset = newValueTable(fixedSlots), newValueTable(remainingSlots), newValueTable(secondsSlots)
	}
	return t
}

// defaultTables serve the zero Policy: the draft fields of DefaultName.
var defaultTables = newTables(Draft)
