package memberpace

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/pedreviljoen/gopherpace/core/transportkit"
	"github.com/pedreviljoen/gopherpace/seeds"
)

// Profile is a set of memberlist timings.
type Profile uint8

const (
	// ProfileLAN (default) is memberlist's LAN configuration probing every
	// 500 ms with a suspicion of 3 probe intervals (a crashed member is
	// declared dead 2.3-2.8 s after the crash in a cluster of up to 10,
	// about 4 s at 100; memberlist's own LAN default takes 5-6 s), an
	// unconfirmed suspicion lasting at most three times that, and a 2 s
	// TCP timeout.
	ProfileLAN Profile = iota
	// ProfileWAN is memberlist's WAN configuration, for links with
	// hundreds of milliseconds of latency.
	ProfileWAN
	// ProfileFast detects failures in about a second (probe every 200 ms),
	// for small clusters on a fast network and for tests. It costs several
	// times the probe traffic of ProfileLAN.
	ProfileFast
)

// Option configures a Transport; New reports invalid values.
type Option func(*config)

type config struct {
	bindAddr      string
	bindPort      int
	advertiseAddr string
	advertisePort int
	nodeName      string
	profile       Profile
	keys          [][]byte
	plaintext     bool
	label         string
	zone          string
	logger        *slog.Logger
	seeds         seeds.Provider
	rejoin        time.Duration
	joinTimeout   time.Duration
	queue         int
	tweak         func(*memberlist.Config)
	errs          []error
}

// Defaults.
const (
	DefaultPort           = 7946
	DefaultRejoinInterval = 10 * time.Second
	// isolatedRejoinInterval is the re-join period while no peer is heard.
	isolatedRejoinInterval = time.Second
	DefaultJoinTimeout     = 5 * time.Second
	DefaultQueueSize       = 4096
	// MaxDatagram keeps every frame in one unfragmented UDP datagram on a
	// 1500-byte MTU, after memberlist's own headers.
	MaxDatagram = transportkit.DefaultMaxFrameSize
)

func defaults() config {
	return config{
		bindAddr:    "0.0.0.0",
		bindPort:    DefaultPort,
		profile:     ProfileLAN,
		rejoin:      DefaultRejoinInterval,
		joinTimeout: DefaultJoinTimeout,
		queue:       DefaultQueueSize,
	}
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("memberpace: "+format, args...))
}

// WithBindAddr sets the IP address to listen on for gossip (UDP and TCP):
// an address such as "10.0.0.5", "127.0.0.1", "::" or "0.0.0.0" (every
// interface). A host name is refused: it could silently mean every
// interface. Default "0.0.0.0".
func WithBindAddr(addr string) Option {
	return func(c *config) {
		if _, err := netip.ParseAddr(addr); err != nil {
			c.fail("bind address %q is not an IP address: give one such as 127.0.0.1 (this host only), 0.0.0.0 (every interface) or the pod's IP", addr)
		}
		c.bindAddr = addr
	}
}

// WithPlaintext accepts unencrypted, unauthenticated gossip on an address
// other peers can reach. Without WithSecretKeys anyone who can send a
// datagram to the gossip port can claim to be a member and report admits
// (docs/security.md); New therefore refuses a non-loopback bind address
// without keys unless this option says that is deliberate (a network only
// the service's own pods can reach, say). It is logged at WARN at start.
func WithPlaintext() Option { return func(c *config) { c.plaintext = true } }

// WithBindPort sets the gossip port; 0 picks a free one (see GossipAddr).
// Default 7946.
func WithBindPort(port int) Option {
	return func(c *config) {
		if port < 0 || port > 65535 {
			c.fail("bind port %d out of range", port)
		}
		c.bindPort = port
	}
}

// WithAdvertise sets the address and port peers should use to reach this
// node, when it differs from the bind address (NAT, or a pod IP from the
// downward API). Port 0 means the bound port.
func WithAdvertise(addr string, port int) Option {
	return func(c *config) {
		if addr == "" || port < 0 || port > 65535 {
			c.fail("invalid advertise address %q port %d", addr, port)
		}
		c.advertiseAddr, c.advertisePort = addr, port
	}
}

// WithNodeName sets this node's unique name in the cluster. Default: the
// host name plus a random suffix, so that a restarted process never
// collides with its own ghost.
func WithNodeName(name string) Option {
	return func(c *config) {
		if name == "" || len(name) > 128 {
			c.fail("node name must be 1-128 bytes")
		}
		c.nodeName = name
	}
}

// WithProfile selects memberlist's timings. Default ProfileLAN.
func WithProfile(p Profile) Option {
	return func(c *config) {
		if p > ProfileFast {
			c.fail("unknown profile %d", p)
		}
		c.profile = p
	}
}

// WithSecretKeys encrypts gossip with AES-GCM. Each key is 16, 24 or 32
// bytes; the first is the primary, used to send; all are tried on receipt.
// Rotate with Keyring: install the new key everywhere, use it, then remove
// the old one. The primary key also gives the limiters their key hash
// secret (KeyHashSecret).
func WithSecretKeys(keys ...[]byte) Option {
	return func(c *config) {
		if len(keys) == 0 {
			c.fail("WithSecretKeys needs at least one key")
		}
		for _, k := range keys {
			if n := len(k); n != 16 && n != 24 && n != 32 {
				c.fail("secret key of %d bytes; must be 16, 24 or 32", n)
			}
		}
		c.keys = keys
	}
}

// WithLabel prefixes every packet with a label; nodes with another label
// drop it. It keeps two clusters on one network apart; it is not a secret.
func WithLabel(label string) Option {
	return func(c *config) {
		if len(label) > 255 {
			c.fail("label longer than 255 bytes")
		}
		c.label = label
	}
}

// WithZone sets this node's zone (or region, or rack), which memberlist
// announces to every member: for example the node's
// topology.kubernetes.io/zone label, passed in an environment variable.
// When the cluster spans two zones or more, the limiters' frames cross
// between zones once, to one node that spreads them inside its zone,
// instead of once per node of the other zone (docs/design.md, "Groups").
// Default none: every node in one zone.
func WithZone(zone string) Option {
	return func(c *config) {
		if len(zone) > 255 {
			c.fail("zone longer than 255 bytes")
		}
		c.zone = zone
	}
}

// WithLogger routes this transport's and memberlist's logs to logger, with
// component=memberlist. Default slog.Default().
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) {
		if logger == nil {
			c.fail("nil logger")
		}
		c.logger = logger
	}
}

// WithSeeds sets where to find peers. The provider is asked afresh on every
// join attempt. Without seeds the node waits to be joined by others.
func WithSeeds(p seeds.Provider) Option {
	return func(c *config) {
		if p == nil {
			c.fail("nil seeds provider")
		}
		c.seeds = p
	}
}

// WithRejoinInterval sets how often the seeds are asked again and missing
// peers joined, which is what heals a memberlist partition. While no peer
// is heard it is every second, and members declared dead that may only be
// cut off are joined every second whatever this interval. Default 10 s
// (±20% jitter), at least 1 s.
func WithRejoinInterval(d time.Duration) Option {
	return func(c *config) {
		if d < time.Second {
			c.fail("rejoin interval %v below 1s", d)
		}
		c.rejoin = d
	}
}

// WithJoinTimeout bounds one join attempt to one seed. Default 5 s.
func WithJoinTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("join timeout must be positive")
		}
		c.joinTimeout = d
	}
}

// WithQueueSize bounds the inbound frame queue; frames arriving while it is
// full are dropped and counted. Default 4096.
func WithQueueSize(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail("queue size must be at least 1")
		}
		c.queue = n
	}
}

// WithMemberlistConfig lets f adjust the memberlist configuration after
// every other option has been applied: a custom memberlist Transport, other
// timings. Keep Name, Delegate and Logger as they are.
func WithMemberlistConfig(f func(*memberlist.Config)) Option {
	return func(c *config) {
		if f == nil {
			c.fail("nil memberlist config func")
		}
		c.tweak = f
	}
}

var errNoConfig = errors.New("memberpace: nil Option")

// ErrUnencrypted is New's refusal of plaintext gossip on an address other
// hosts can reach (without WithSecretKeys or WithPlaintext); a program
// that sets the key some other way (a flag) can name that way instead.
var ErrUnencrypted = errors.New("memberpace: gossip on an address other hosts can reach needs a secret key")

// checkExposure refuses plaintext gossip on an address other hosts can
// reach, unless WithPlaintext says it is deliberate. It reports whether
// the configuration is plaintext on such an address, to warn about.
func (c *config) checkExposure() (exposed bool, err error) {
	addr, perr := netip.ParseAddr(c.bindAddr)
	if perr != nil || len(c.keys) > 0 || addr.IsLoopback() {
		return false, nil
	}
	if !c.plaintext {
		return true, fmt.Errorf("%w: gossip on %s without encryption: anyone who can reach the gossip port could report admits and switch the limit off. Pass WithSecretKeys(key), the same on every node, or WithPlaintext() if only trusted hosts can reach the port (see docs/security.md)", ErrUnencrypted, c.bindAddr)
	}
	return true, nil
}
