package cluster

// A Partition policy is what a node does while it hears only part of the
// cluster: core's PartitionPolicy, whose values these are.
type Partition uint8

const (
	// PartitionShare scales each side's refill by the share of the
	// cluster it can see.
	PartitionShare Partition = iota
	// PartitionFailClosed shares, but a node cut off from every peer
	// admits nothing.
	PartitionFailClosed
	// PartitionFailOpen refills at the full rate on every side.
	PartitionFailOpen
)

func (p Partition) String() string {
	switch p {
	case PartitionShare:
		return "share"
	case PartitionFailClosed:
		return "fail-closed"
	case PartitionFailOpen:
		return "fail-open"
	}
	return "unknown"
}

// goneReporter is a transport that can tell a member gone for good from
// one cut off (core's GoneReporter).
type goneReporter interface {
	Gone(member string) bool
}
