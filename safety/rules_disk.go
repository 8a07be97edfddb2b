package safety

import (
	"path"
	"strings"
)

// formatters create a filesystem or swap area (or erase a disk's
// signatures), destroying what the target held.
var formatters = map[string]bool{"mkfs": true, "mke2fs": true, "mkswap": true, "newfs": true,
	"mkdosfs": true, "mkntfs": true, "mkexfatfs": true, "mkudffs": true, "mkreiserfs": true}

// isFormatter matches the command's base name exactly: mkfs, mkfs.TYPE,
// mke2fs, mkdosfs, ...; mkfs_wrapper.sh or mkfs-notes are other programs.
func isFormatter(name string) bool {
	return formatters[name] || strings.HasPrefix(name, "mkfs.") && len(name) > len("mkfs.") ||
		strings.HasPrefix(name, "newfs_") && len(name) > len("newfs_")
}

// partitioners rewrite a disk's partition table.
var partitioners = map[string]bool{"sgdisk": true, "sfdisk": true, "fdisk": true, "gdisk": true,
	"cfdisk": true, "parted": true}

// wipefsErases reports whether wipefs erases signatures (-a, -o) rather
// than listing them (no option, or -n).
func wipefsErases(args []field) bool {
	erase, noAct := false, false
	for i := 1; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "--":
			return erase && !noAct
		case strings.HasPrefix(a, "--"):
			name, _, eq := strings.Cut(a[2:], "=")
			switch name {
			case "all":
				erase = true
			case "no-act":
				noAct = true
			case "offset", "types", "output":
				erase = erase || name == "offset"
				if !eq {
					i++
				}
			}
		case len(a) > 1 && a[0] == '-':
		cluster:
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'a':
					erase = true
				case 'n':
					noAct = true
				case 'o', 'O', 't':
					erase = erase || a[j] == 'o'
					if j == len(a)-1 {
						i++
					}
					break cluster
				}
			}
		}
	}
	return erase && !noAct
}

// partitionWrite returns a description of the partition-table change a
// partitioning tool makes, or "" when it only reads (lists, prints,
// verifies, pretends) or shows help. Like mkfs, the target is not looked
// at: it is often a variable, and a disk image is the user's to prepare.
func partitionWrite(name string, args []field) string {
	if name == "sgdisk" {
		return sgdiskWrite(args)
	}
	// Options that make the whole command read-only, short options taking
	// an argument and long options taking one.
	var ro, withArg string
	var roLong, argLong []string
	switch name {
	case "sfdisk":
		ro, withArg = "ldJsgVFnThv", "oXYwWN"
		roLong = []string{"list", "dump", "json", "show-size", "show-geometry", "verify", "list-free",
			"no-act", "list-types", "help", "version"}
		argLong = []string{"output", "label", "label-nested", "sector-size", "wipe", "wipe-partitions",
			"color", "lock", "backup-file"}
	case "fdisk", "gdisk":
		ro, withArg = "lhVx", "bCHSoLuwW"
		roLong = []string{"list", "list-details", "help", "version"}
		argLong = []string{"sector-size", "cylinders", "heads", "sectors", "output", "wipe", "wipe-partitions",
			"type", "lock", "color", "units", "compatibility"}
	case "cfdisk":
		ro = "hV"
		roLong = []string{"help", "version"}
	case "parted":
		ro, withArg = "lhv", "a"
		roLong = []string{"list", "help", "version"}
		argLong = []string{"align"}
	}
	var operands []field
	for i := 1; i < len(args); i++ {
		a := args[i].s
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			n, _, eq := strings.Cut(a[2:], "=")
			if contains(roLong, n) {
				return ""
			}
			if !eq && contains(argLong, n) {
				i++
			}
		case len(a) < 2 || a[0] != '-':
			operands = append(operands, args[i])
		default:
			for j := 1; j < len(a); j++ {
				if strings.IndexByte(ro, a[j]) >= 0 {
					return ""
				}
				if strings.IndexByte(withArg, a[j]) >= 0 {
					if j == len(a)-1 {
						i++
					}
					break
				}
			}
		}
	}
	switch {
	case len(operands) == 0:
		return "" // no disk named: usage
	case name == "parted" && len(operands) > 1 && partedReadOnly(operands[1:]):
		return ""
	}
	return name + " " + operands[0].s
}

// sgdiskWrite is partitionWrite for sgdisk, whose options accumulate:
// any option other than the read-only ones changes the table, unless
// -P/--pretend keeps the changes in memory.
func sgdiskWrite(args []field) string {
	pretend, write := false, ""
	for i := 1; i < len(args); i++ {
		a := args[i].s
		if strings.HasPrefix(a, "--") {
			n, _, eq := strings.Cut(a[2:], "=")
			switch n {
			case "pretend":
				pretend = true
			case "info", "backup":
				if !eq {
					i++
				}
			case "print", "verify", "list-types", "print-mbr", "display-alignment", "version", "help", "usage":
			default:
				if write == "" {
					write = a
				}
			}
			continue
		}
		if len(a) < 2 || a[0] != '-' {
			continue // the disk, or an option's argument
		}
	cluster:
		for j := 1; j < len(a); j++ {
			switch ch := a[j]; {
			case ch == 'P':
				pretend = true
			case strings.IndexByte("pvLODV?", ch) >= 0:
			case ch == 'i' || ch == 'b':
				if j == len(a)-1 {
					i++
				}
				break cluster
			default:
				if write == "" {
					write = a
				}
				break cluster
			}
		}
	}
	if pretend || write == "" {
		return ""
	}
	return "sgdisk " + write
}

// partedReadOnly reports whether parted's command words only print.
func partedReadOnly(cmds []field) bool {
	for i := 0; i < len(cmds); i++ {
		switch cmds[i].s {
		case "print", "p", "help", "version", "quit":
		case "unit", "align-check":
			i++ // unit UNIT, align-check TYPE N
			if cmds[i-1].s == "align-check" {
				i++
			}
		default:
			return false
		}
	}
	return true
}

func (c *checker) deviceWrite(name string, f field) {
	if f.dyn {
		return
	}
	if dev, ok := blockDevice(f.s); ok {
		c.report(Verdict{Decision: Block, Rule: "write-device",
			Reason:      name + " writes to block device " + dev + ", destroying its data",
			Alternative: "write to a regular file instead and let the user handle devices"})
	}
}

// blockDevRe matches disk-like block device paths; compiled on first use.
var blockDevRe = lazyRegexp(`^/dev/(sd[a-z]+[0-9]*|hd[a-z]+[0-9]*|vd[a-z]+[0-9]*|xvd[a-z]+[0-9]*|` +
	`nvme[0-9]+(n[0-9]+(p[0-9]+)?)?|mmcblk[0-9]+(p[0-9]+|boot[0-9]+)?|loop[0-9]+|md[0-9]+|dm-[0-9]+|` +
	`sr[0-9]+|fd[0-9]+|nbd[0-9]+|zd[0-9]+|ram[0-9]+|ubd[a-z]+|rbd[0-9]+|r?disk[0-9]+(s[0-9]+)?|` +
	`mapper/.+|disk/.+|md/.+|block/.+|[a-z]+vg/.+)$`)

// blockDevice reports whether p is a disk-like block device path.
func blockDevice(p string) (string, bool) {
	if !strings.HasPrefix(p, "/dev/") {
		return "", false
	}
	p = path.Clean(p)
	if p == "/dev/mapper/control" {
		return "", false
	}
	return p, blockDevRe().MatchString(p)
}

// dd of=/dev/DISK overwrites a disk.
func (c *checker) dd(args []field) {
	for _, f := range args[1:] {
		if v, ok := strings.CutPrefix(f.s, "of="); ok {
			if dev, ok := blockDevice(v); ok {
				c.report(Verdict{Decision: Block, Rule: "dd-device",
					Reason:      "dd writes directly to block device " + dev + ", destroying its data",
					Alternative: "write to an image file instead (e.g. of=./disk.img)"})
			}
		}
	}
}

// format blocks mkfs and the other formatters, whatever the target.
func (c *checker) format(name string, args []field, in stdinSrc) {
	what := " creates a filesystem, erasing everything on the target"
	if name == "wipefs" {
		what = " erases the filesystem and partition-table signatures on its target"
	}
	c.report(Verdict{Decision: Block, Rule: "mkfs", Reason: name + what,
		Alternative: "leave formatting disks to the user; to test, use a loop image under /tmp set up by the user"})
}

// wipefs erases signatures with -a or -o; without them it only lists.
func (c *checker) wipefs(name string, args []field, in stdinSrc) {
	if wipefsErases(args) {
		c.format(name, args, in)
	}
}

// partition blocks a partitioning tool that writes a partition table.
func (c *checker) partition(name string, args []field, _ stdinSrc) {
	if what := partitionWrite(name, args); what != "" {
		c.report(Verdict{Decision: Block, Rule: "partition",
			Reason:      what + " rewrites a partition table, making the data on the disk unreachable",
			Alternative: "leave partitioning disks to the user; list partitions with lsblk or " + name + " in read-only mode"})
	}
}

// writesDevices checks tee, shred, blkdiscard and badblocks: every operand
// may be written.
func (c *checker) writesDevices(name string, args []field, _ stdinSrc) {
	for _, f := range args[1:] {
		c.deviceWrite(name, f)
	}
}

// copiesToDevice checks cp, mv, install, pv and ddrescue: the last operand
// is written.
func (c *checker) copiesToDevice(name string, args []field, _ stdinSrc) {
	if len(args) > 2 {
		c.deviceWrite(name, args[len(args)-1])
	}
}
