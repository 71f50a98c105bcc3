package rlserver

import (
	"bytes"

	"go.yaml.in/yaml/v3"
)

// The YAML library reads a whole document into a tree before anyone can
// look at it, about 21 times the text's size: 180 MB for a file of 100,000
// descriptors. A config file's top-level descriptors are independent of
// one another, so in the usual layout (a block list under a "descriptors:"
// line at the left margin) each item is read alone, and the tree of one
// item is garbage before the next is read. Any other layout, and any
// item that does not read alone (an alias of another item's anchor), is
// read whole instead, so the result never differs.

// descriptorItem is one top-level item of the descriptors list: its text,
// and the line of the file it starts on.
type descriptorItem struct {
	text []byte
	line int
}

// splitDescriptors finds the descriptors list of a config's text. rest is
// the text without it (its lines left empty, so that line numbers hold),
// and items are the list's items. ok is false when the text is not laid
// out so: the caller reads it whole.
func splitDescriptors(data []byte) (rest []byte, items []descriptorItem, ok bool) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	start := -1
	for i, l := range lines {
		if bytes.Equal(bytes.TrimRight(l, " \t\r\n"), []byte("descriptors:")) {
			if start >= 0 {
				return nil, nil, false // twice: let the parser say so
			}
			start = i
		}
	}
	if start < 0 {
		return nil, nil, false
	}
	// The items: lines after it until the next key at the left margin.
	end, col := len(lines), -1
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		body := bytes.TrimLeft(l, " ")
		indent := len(l) - len(body)
		if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] == '#' {
			continue // blank and comment lines belong to the item before
		}
		if col < 0 {
			if !isItemStart(body) {
				return nil, nil, false
			}
			col = indent
		}
		if indent == 0 && !isItemStart(body) {
			end = i
			break
		}
		switch {
		case indent < col:
			return nil, nil, false
		case indent == col && isItemStart(body):
			items = append(items, descriptorItem{line: i + 1})
		case indent == col:
			return nil, nil, false // a key beside the items, not in one
		}
		if len(items) == 0 {
			return nil, nil, false
		}
		last := &items[len(items)-1]
		last.text = append(last.text, l...)
	}
	if col < 0 || len(items) == 0 {
		return nil, nil, false
	}
	var b bytes.Buffer
	b.Grow(len(data))
	for i, l := range lines {
		if i >= start && i < end {
			if bytes.HasSuffix(l, []byte("\n")) {
				b.WriteByte('\n')
			}
			continue
		}
		b.Write(l)
	}
	return b.Bytes(), items, true
}

func isItemStart(body []byte) bool {
	return bytes.HasPrefix(body, []byte("- ")) || bytes.Equal(bytes.TrimRight(body, "\r\n"), []byte("-"))
}

// readItem reads one item alone: a list of one descriptor, its nodes'
// lines made the file's. ok is false when it does not read alone.
func readItem(it descriptorItem) (*yaml.Node, bool) {
	var doc yaml.Node
	if err := yaml.Unmarshal(it.text, &doc); err != nil || len(doc.Content) != 1 {
		return nil, false
	}
	list := doc.Content[0]
	if list.Kind != yaml.SequenceNode || len(list.Content) != 1 {
		return nil, false
	}
	shiftLines(list, it.line-1)
	return list, true
}

func shiftLines(n *yaml.Node, by int) {
	n.Line += by
	for _, c := range n.Content {
		shiftLines(c, by)
	}
}
