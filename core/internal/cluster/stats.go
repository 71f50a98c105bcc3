package cluster

import "github.com/pedreviljoen/gopherpace/core/internal/bucket"

// Stats is core's Stats field for field, so that one converts to the
// other (core documents the fields); the engine fills its part.
type Stats struct {
	Allowed, Denied, TokensAllowed                                      uint64
	GlobalTokens                                                        int64
	LiveKeys                                                            int64
	KeysEvicted                                                         uint64
	Clustered                                                           bool
	VisibleNodes, KnownNodes                                            int64
	HeardNodes                                                          int64
	Partitioned                                                         bool
	FramesSent, BytesSent, FramesReceived, BytesReceived                uint64
	FramesMalformed, FramesDuplicate, FramesOtherLimiter, FramesMissing uint64
	FramesOtherVersion                                                  uint64
	DatagramsSent                                                       uint64
	DatagramsToPeers, BytesToPeers                                      uint64
	FramesRelayed, RelayDropped                                         uint64
	FramesNotMember                                                     uint64
	SendFailures                                                        uint64
	TokensReported, TokensCharged                                       uint64
	KeysDropped                                                         uint64
	FramesOtherKeyHash                                                  uint64
	HotKeys                                                             int64
	HotKeysRefused                                                      uint64
	ShadowDenials                                                       uint64
	RefundsRefused                                                      uint64
	Closed                                                              bool
}

// FillStats writes the engine's part of a Stats snapshot, and returns the
// buckets' time at now and the global bucket's TAT at it.
func (e *Engine) FillStats(s *Stats, now int64) (at bucket.Time, tat int64) {
	at = e.bucketTime(now)
	if t, ok := e.word.tat(e.rules.Default(), at); ok {
		tat = t
	} else { // handed back: the standalone word, on the limiter's clock
		at, tat = bucket.StandaloneTime(now), e.standalone.Load()
	}
	s.LiveKeys, s.KeysEvicted = e.keys.LiveAt(at), e.keys.EvictedCount()
	s.Clustered = true
	vs, ss, rs := &e.view.stats, &e.send.stats, &e.recv.stats
	s.VisibleNodes, s.KnownNodes, s.HeardNodes = vs.visible.Load(), vs.known.Load(), vs.heard.Load()
	s.Partitioned = s.VisibleNodes < s.KnownNodes
	s.FramesSent, s.BytesSent = ss.Frames.Load(), ss.Bytes.Load()
	s.FramesReceived, s.BytesReceived = rs.framesReceived.Load(), rs.bytesReceived.Load()
	hs := e.hub.Counts()
	s.FramesMalformed, s.FramesDuplicate = rs.malformed.Load()+hs.Malformed, rs.duplicate.Load()+hs.Untagged
	s.FramesOtherLimiter, s.KeysDropped = rs.otherLimiter.Load()+hs.OtherLimiter, rs.keysDropped.Load()
	s.FramesOtherKeyHash = rs.otherKeyHash.Load()
	s.FramesNotMember, s.SendFailures = rs.notMember.Load()+hs.NotMember, ss.Failures.Load()
	s.FramesOtherVersion, s.DatagramsSent = hs.OtherVersion, hs.DatagramsSent
	s.DatagramsToPeers, s.BytesToPeers = hs.PeerDatagrams, hs.PeerBytes
	s.FramesRelayed, s.RelayDropped = hs.Relayed, hs.RelayDropped
	s.TokensReported, s.TokensCharged = ss.tokensReported.Load(), rs.tokensCharged.Load()
	s.HotKeysRefused = e.keyShares.tableFull.Load()
	e.mu.Lock()
	s.FramesMissing = e.view.missing()
	s.HotKeys = int64(len(e.keyShares.hot))
	e.mu.Unlock()
	return at, tat
}
