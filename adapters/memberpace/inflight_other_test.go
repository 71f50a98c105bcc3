//go:build !unix

package memberpace

// The in-flight test shares its counts across processes through a mapped
// file, which needs a unix: elsewhere there is no child to run.
const inFlightChildEnv = "MEMBERPACE_INFLIGHT_CHILD"

func runInFlightChild() int { return 1 }
