package mirror

// Objects are checked on the way in: every fetch into a mirror (from an
// upstream or from a node's copy) runs git's fsck over the received pack,
// in strict mode, so that an object git itself would refuse to check out
// (a ".git" tree entry, a bad path, a hostile .gitmodules) is never stored
// or served. Strict mode also refuses the cosmetic defects that real,
// old repositories carry (malformed dates, zero-padded modes, odd
// identities); those are ignored by name. Everything not listed keeps
// git's verdict.

// fsckIgnored are git fsck message IDs that real repositories carry and
// that cannot hurt a client: bad or odd identities and dates in commits and
// tags, zero-padded or unusual file modes, full paths or a missing tagger.
// They are refused by a strict fetch only because strict mode turns every
// warning into an error.
var fsckIgnored = []string{
	"badDate", "badDateOverflow", "badEmail", "badFilemode", "badTagName", "badTimezone",
	"emptyName", "extraHeaderEntry", "fullPathname", "missingEmail", "missingNameBeforeEmail",
	"missingSpaceBeforeDate", "missingSpaceBeforeEmail", "missingTaggerEntry",
	"multipleAuthors", "zeroPaddedDate", "zeroPaddedFilemode",
}

// fsckFatal are the message IDs that make a checkout unsafe: tree entries
// that write into .git or out of the work tree, and submodule or attribute
// files built to exploit a client (git 2.39's IDs; newer ones keep their default). They are errors already in strict mode;
// naming them keeps them fatal whatever git's defaults become.
var fsckFatal = []string{
	"hasDot", "hasDotdot", "hasDotgit", "badTree", "duplicateEntries", "treeNotSorted",
	"gitmodulesMissing", "gitmodulesBlob", "gitmodulesLarge", "gitmodulesName",
	"gitmodulesParse", "gitmodulesPath", "gitmodulesSymlink", "gitmodulesUpdate", "gitmodulesUrl",
}

// FsckConfig is the git configuration (-c values) of a checked fetch.
func FsckConfig() []string {
	cfg := make([]string, 0, 2+len(fsckIgnored)+len(fsckFatal))
	cfg = append(cfg, "fetch.fsckObjects=true", "transfer.fsckObjects=true")
	for _, id := range fsckIgnored {
		cfg = append(cfg, "fetch.fsck."+id+"=ignore")
	}
	for _, id := range fsckFatal {
		cfg = append(cfg, "fetch.fsck."+id+"=error")
	}
	return cfg
}
