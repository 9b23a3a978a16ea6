package repokey

import "testing"

// BenchmarkNormalize: one URL to its key, for the spellings a catalog or an
// API call brings: lower case (the catalog's fast path handles most of
// these itself), upper case on a host that folds it, upper case kept on one
// that does not, and an ssh URL.
func BenchmarkNormalize(b *testing.B) {
	for _, u := range []string{
		"https://github.com/owner/repo.git",
		"https://github.com/Owner/Repo.git",
		"https://gitlab.com/Group/Sub/Project.git",
		"git@gitee.com:src-openeuler/python-flufl.lock.git",
	} {
		b.Run(u, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := Normalize(u, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRedact: a log line without a credential (the usual case) and one
// with a URL's password and a token.
func BenchmarkRedact(b *testing.B) {
	for name, s := range map[string]string{
		"clean":  `check failed key=github.com/a/b class=network err="git ls-remote https://github.com/a/b.git: unable to access"`,
		"secret": `skipped https://user:ghp_SECRETsecretSECRETsecretSECRET123456@host.example/s/x.git`,
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_ = Redact(s)
			}
		})
	}
}
