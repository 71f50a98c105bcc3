// Package seeds finds the peers a clustered gopherpace node joins: a fixed
// list (Static), the A/AAAA records of a DNS name such as a Kubernetes
// headless Service (DNS), or the first of several that yields anything
// (Fallback).
//
// A Provider is consulted afresh on every join attempt, so a DNS name
// follows pods as they come and go. The package imports only the standard
// library.
package seeds
