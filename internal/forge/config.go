package forge

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// TokensEnv is the environment variable that holds forge tokens, in the
// form "HOST=TOKEN,HOST=TOKEN" (commas, spaces or newlines between
// entries), read beside --forge-token.
const TokensEnv = "GITFLEET_FORGE_TOKENS"

// redacted is what a token shows of itself.
const redacted = "[redacted]"

// Token is a forge API token, a secret: it prints, logs and marshals as
// "[redacted]". The secret sits behind a pointer so that even a struct
// that holds a Token in an unexported field prints an address, not the
// secret. The zero Token is empty.
type Token struct{ p *string }

// NewToken wraps a secret.
func NewToken(secret string) Token { return Token{p: &secret} }

// secret returns the token itself, for the Authorization header only.
func (t Token) secret() string {
	if t.p == nil {
		return ""
	}
	return *t.p
}

func (t Token) String() string                { return redacted }
func (t Token) GoString() string              { return redacted }
func (t Token) LogValue() slog.Value          { return slog.StringValue(redacted) }
func (t Token) MarshalText() ([]byte, error)  { return []byte(redacted), nil }
func (t Token) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(redacted)) }

// Config is the forges the feed asks, and their tokens.
type Config struct {
	Forges map[string]Forge   // by host
	Tokens map[string][]Token // by host, used in turn
}

// DefaultForges returns the well-known hosts of every kind, configured
// with their public API bases.
func DefaultForges() map[string]Forge {
	out := map[string]Forge{}
	for _, k := range kinds {
		for host, api := range k.wellKnown {
			u, err := url.Parse(api)
			if err != nil {
				panic("forge: bad API base in the table: " + api)
			}
			out[host] = Forge{Host: host, Kind: k.kind, API: u}
		}
	}
	return out
}

// Parse builds the configuration from the --forge and --forge-token
// values and the environment's GITFLEET_FORGE_TOKENS (env: its value).
// The well-known hosts are configured by default; --forge for one of
// them replaces its default. A token for a host that is not a forge is an
// error. Errors never include a token.
func Parse(forges, tokens []string, env string) (Config, error) {
	c := Config{Forges: DefaultForges(), Tokens: map[string][]Token{}}
	for _, s := range forges {
		f, err := ParseForge(s)
		if err != nil {
			return Config{}, err
		}
		c.Forges[f.Host] = f
	}
	add := func(host string, tok Token, from string) error {
		if _, ok := c.Forges[host]; !ok {
			return fmt.Errorf("%s: a token for %s, which is not a forge: add --forge %s=KIND (one of %v)", from, host, host, Kinds())
		}
		c.Tokens[host] = append(c.Tokens[host], tok)
		return nil
	}
	for i, s := range tokens {
		host, tok, err := ParseToken(s)
		if err != nil {
			return Config{}, fmt.Errorf("--forge-token #%d: %w", i+1, err)
		}
		if err := add(host, tok, fmt.Sprintf("--forge-token #%d", i+1)); err != nil {
			return Config{}, err
		}
	}
	for i, s := range splitEnv(env) {
		host, tok, err := ParseToken(s)
		if err != nil {
			return Config{}, fmt.Errorf("%s entry #%d: %w", TokensEnv, i+1, err)
		}
		if err := add(host, tok, fmt.Sprintf("%s entry #%d", TokensEnv, i+1)); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// Hosts returns the configured hosts, sorted.
func (c Config) Hosts() []string {
	out := make([]string, 0, len(c.Forges))
	for h := range c.Forges {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

func splitEnv(env string) []string {
	return strings.FieldsFunc(env, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' })
}

// ParseForge parses "HOST=KIND[,api=URL]". Without api, the host's API
// base is the well-known one, or the kind's usual path on the host
// itself (https://HOST/api/v4 for GitLab, https://HOST/api for GitHub
// Enterprise, whose GraphQL is at /api/graphql).
func ParseForge(s string) (Forge, error) {
	// The error quotes HOST=KIND only: an api URL could hold a
	// password, which ParseAPI refuses without showing it.
	shown, _, _ := strings.Cut(s, ",")
	fail := func(format string, a ...any) (Forge, error) {
		return Forge{}, fmt.Errorf("--forge %q: %s", shown, fmt.Sprintf(format, a...))
	}
	hostPart, rest, ok := strings.Cut(s, "=")
	if !ok {
		return fail("want HOST=KIND[,api=URL]")
	}
	host, err := parseHost(hostPart)
	if err != nil {
		return fail("%v", err)
	}
	fields := strings.Split(rest, ",")
	ki, ok := lookupKind(Kind(fields[0]))
	if !ok {
		return fail("unknown kind %q (want one of %v)", fields[0], Kinds())
	}
	api := ki.wellKnown[host]
	if api == "" && ki.selfHosted != nil {
		api = ki.selfHosted(host)
	}
	for _, opt := range fields[1:] {
		k, v, _ := strings.Cut(opt, "=")
		switch k {
		case "api":
			api = v
		default:
			return fail("unknown option %q (want api=URL)", k)
		}
	}
	if api == "" {
		return fail("%s is not self-hosted: give api=URL", ki.kind)
	}
	u, err := ParseAPI(api)
	if err != nil {
		return fail("%v", err)
	}
	return Forge{Host: host, Kind: ki.kind, API: u}, nil
}

// ParseAPI checks an API base URL: http or https, a host, no
// credentials, no query or fragment. A trailing slash is dropped.
func ParseAPI(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text quotes the URL, password and all
		}
		return nil, fmt.Errorf("api URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("api URL %q: scheme must be http or https", u.Redacted())
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("api URL %q: no host", u.Redacted())
	case u.User != nil:
		// Credentials go in --forge-token, never in a URL that is shown.
		return nil, fmt.Errorf("api URL %q: no user or password in the URL: give --forge-token", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return nil, fmt.Errorf("api URL %q: no query or fragment", u.Redacted())
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// ParseToken parses "HOST=TOKEN". Its errors never include the token.
func ParseToken(s string) (host string, tok Token, err error) {
	h, secret, ok := strings.Cut(s, "=")
	if !ok {
		return "", Token{}, errors.New("want HOST=TOKEN")
	}
	host, err = parseHost(h)
	if err != nil {
		return "", Token{}, err
	}
	if secret == "" {
		return "", Token{}, fmt.Errorf("empty token for %s", host)
	}
	for _, r := range secret {
		if r <= ' ' || r == 0x7f || r == ',' || r > 0x7e {
			return "", Token{}, fmt.Errorf("token for %s: a space, comma, control or non-ASCII character (tokens are printable ASCII)", host)
		}
	}
	return host, NewToken(secret), nil
}

// parseHost checks a host as keys spell it: a name or address, with a
// port when not the default, lower case.
func parseHost(h string) (string, error) {
	h = strings.ToLower(strings.TrimSpace(h))
	if h == "" {
		return "", errors.New("empty host")
	}
	name := h
	if hp, port, err := net.SplitHostPort(h); err == nil {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 || strconv.FormatUint(n, 10) != port {
			return "", fmt.Errorf("host %q: bad port", h)
		}
		if n == 443 {
			return "", fmt.Errorf("host %q: keys leave out the default port 443", h)
		}
		name = hp
	}
	name = strings.Trim(name, "[]")
	if name == "" || len(name) > 253 {
		return "", fmt.Errorf("host %q: bad name", h)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == ':') {
			return "", fmt.Errorf("host %q: bad character %q (want the host as in repository keys)", h, r)
		}
	}
	return h, nil
}
