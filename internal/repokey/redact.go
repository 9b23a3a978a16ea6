package repokey

import (
	"regexp"
	"strings"
)

// Credentials that appear in URLs or beside them: the userinfo of a URL
// (`https://user:secret@host/`), and tokens of the forms the forges issue,
// wherever they stand.
var (
	userinfoRE = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@"'<>]+@`)
	tokenRE    = regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|gl(?:dt|ft|rt|soat|oas|cbt|imt|ptt|agent)-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,})`)
)

// Redacted stands where a credential was.
const Redacted = "REDACTED"

// Redact returns s with every credential that a URL may carry replaced by
// REDACTED: the user and password of any URL in s (`https://u:p@h/x` becomes
// `https://REDACTED@h/x`; an ssh URL's plain user name, as in
// `ssh://git@host/x`, is kept) and forge tokens (GitHub's `ghp_…`,
// `github_pat_…`, GitLab's `glpat-…`, Slack's `xox…-…`) wherever they stand.
// It is what logs, the API, the console, the fetch log and alerts show of
// an operator's or a catalog's text.
func Redact(s string) string {
	if strings.Contains(s, "@") {
		s = userinfoRE.ReplaceAllStringFunc(s, func(m string) string {
			scheme, user, _ := strings.Cut(m, "://")
			if strings.EqualFold(scheme, "ssh") && validSSHUser(strings.TrimSuffix(user, "@")) {
				return m // ssh://git@host/x: a user name, not a secret
			}
			return scheme + "://" + Redacted + "@"
		})
	}
	if mayHoldToken(s) {
		s = tokenRE.ReplaceAllString(s, Redacted)
	}
	return s
}

// tokenPrefixes are what every token tokenRE matches starts with (or, for
// GitHub's fine-grained tokens, holds): a cheap test before the regexp.
var tokenPrefixes = []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "_pat_", "glpat-", "gldt-", "glft-", "glrt-",
	"glsoat-", "gloas-", "glcbt-", "glimt-", "glptt-", "glagent-", "xox"}

func mayHoldToken(s string) bool {
	for _, p := range tokenPrefixes {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
