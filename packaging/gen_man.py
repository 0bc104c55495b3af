#!/usr/bin/env python3
"""Man pages from the kelp binary's own help: `kelp -h` gives kelp(1) and the list of
commands, `kelp CMD -h` gives kelp-CMD(1) (synopsis, description, every flag with its default),
and mount.kelp(8) is written here from the helper's calling convention. Run at build time
(cmake/KelpPackage.cmake), so the pages always match the flags of the binary being packaged.

  gen_man.py KELP_BINARY OUT_DIR VERSION
"""
import datetime
import gzip
import os
import re
import subprocess
import sys

_EPOCH = os.environ.get("SOURCE_DATE_EPOCH")
DATE = (datetime.datetime.fromtimestamp(int(_EPOCH), datetime.timezone.utc).date() if _EPOCH
        else datetime.date.today()).isoformat()


def roff(text):
    """Escapes text for roff: backslashes, leading dots and quotes, hyphens in flags."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"(?m)^([.'])", r"\\&\1", text)
    return text.replace("-", "\\-")


def header(name, section, version, summary):
    return [f'.TH "{name.upper()}" "{section}" "{DATE}" "kelp {version}" "Kelp manual"',
            ".SH NAME", f"{roff(name)} \\- {roff(summary)}"]


def command_page(kelp, cmd, summary, version):
    r = subprocess.run([kelp, cmd, "-h"], capture_output=True, text=True, timeout=30)
    help_text = r.stdout
    m = re.match(r"Usage: (.*?)\n\n(.*?)\n\nFlags:\n(.*)", help_text, re.S)
    if not m:
        sys.exit(f"gen_man: cannot parse `kelp {cmd} -h`:\n{help_text}{r.stderr}")
    synopsis, description, flags = m.groups()
    out = header(f"kelp-{cmd}", 1, version, summary)
    out += [".SH SYNOPSIS", f".B {roff(synopsis)}", ".SH DESCRIPTION"]
    for para in description.split("\n\n"):
        out += [roff(" ".join(para.split("\n"))), ".PP"]
    out.pop()
    out += [".SH OPTIONS",
            "Flags are Go\\-style: \\fB\\-flag=value\\fR, \\fB\\-\\-flag=value\\fR or "
            "\\fB\\-flag value\\fR; a bare \\fB\\-flag\\fR sets a boolean."]
    lines = flags.rstrip("\n").split("\n")
    i = 0
    while i < len(lines):
        fm = re.match(r"  -(\S+)(?: (\S+))?$", lines[i])
        if not fm:
            i += 1
            continue
        text = lines[i + 1].strip() if i + 1 < len(lines) else ""
        arg = f" \\fI{roff(fm.group(2))}\\fR" if fm.group(2) else ""
        out += [".TP", f"\\fB\\-{roff(fm.group(1))}\\fR{arg}", roff(text)]
        i += 2
    out += [".SH SEE ALSO", "\\fBkelp\\fR(1), \\fBmount.kelp\\fR(8)",
            ".PP", "/usr/share/doc/kelp/README.md and /usr/share/doc/kelp/docs/"]
    return out


def main_page(kelp, commands, version):
    out = header("kelp", 1, version, "a distributed filesystem (filer, volume servers, FUSE mount)")
    out += [".SH SYNOPSIS", ".B kelp", "\\fIcommand\\fR [\\fIflags\\fR]", ".SH DESCRIPTION",
            "One binary with subcommands, as SeaweedFS's weed has them. "
            "\\fBkelp \\fIcommand\\fB \\-h\\fR lists the flags of a command with their defaults.",
            ".SH COMMANDS"]
    for cmd, summary in commands:
        out += [".TP", f"\\fB{roff(cmd)}\\fR", roff(summary) + f" (\\fBkelp\\-{roff(cmd)}\\fR(1))"]
    out += [".SH FILES",
            ".TP", "/etc/default/kelp", "options of the systemd units kelp\\-server, kelp\\-filer, kelp\\-volume@",
            ".TP", "/var/lib/kelp", "data of the systemd units",
            ".SH SEE ALSO", "\\fBmount.kelp\\fR(8), /usr/share/doc/kelp/"]
    return out


def helper_page(version):
    out = header("mount.kelp", 8, version, "mount a Kelp filesystem with mount(8) or /etc/fstab")
    out += [".SH SYNOPSIS",
            ".B mount \\-t kelp",
            "\\fIfiler_host\\fR:\\fIport\\fR[:\\fI/path\\fR] \\fImountpoint\\fR [\\fB\\-o\\fR \\fIoptions\\fR]",
            ".br", ".B mount.kelp",
            "\\fIfiler_host\\fR:\\fIport\\fR[:\\fI/path\\fR] \\fImountpoint\\fR [\\fB\\-sfnv\\fR] [\\fB\\-o\\fR \\fIoptions\\fR]",
            ".SH DESCRIPTION",
            "Runs \\fBkelp mount\\fR in the background for the filer at \\fIfiler_host\\fR:\\fIport\\fR "
            "(its HTTP port), showing \\fI/path\\fR of its namespace (default /) at \\fImountpoint\\fR. "
            "The command returns 0 once the mount is live, or fails with kelp mount's error. "
            "\\fBumount\\fR flushes everything written, then the daemon exits.",
            ".SH OPTIONS",
            "Every \\fIname\\fR=\\fIvalue\\fR or \\fIname\\fR becomes the flag \\fB\\-\\fIname\\fR=\\fIvalue\\fR "
            "of \\fBkelp mount\\fR (see \\fBkelp\\-mount\\fR(1)), e.g. chunkSizeLimitMB=4,cacheCapacityMB=1000; "
            "an unknown name fails the mount. \\fBro\\fR and \\fBallow_other\\fR map to \\-readOnly and "
            "\\-allowOthers. The options of mount(8) and systemd (defaults, _netdev, nofail, noauto, "
            "x\\-systemd.*, rw, nosuid, nodev, noatime...) are accepted and left to them. "
            "\\fBlogFile\\fR=\\fIpath\\fR keeps the daemon's log (default: the journal under systemd, else none). "
            "Paths in options must be absolute.",
            ".SH EXAMPLES",
            ".nf",
            "mount \\-t kelp 127.0.0.1:8888:/ /mnt/kelp \\-o chunkSizeLimitMB=4,cacheCapacityMB=1000",
            "",
            "# /etc/fstab",
            "127.0.0.1:8888:/  /mnt/kelp  kelp  _netdev,chunkSizeLimitMB=4,cacheCapacityMB=1000  0  0",
            ".fi",
            ".SH SEE ALSO", "\\fBkelp\\-mount\\fR(1), \\fBmount\\fR(8), \\fBfstab\\fR(5)"]
    return out


def write(out_dir, name, lines):
    path = os.path.join(out_dir, name + ".gz")
    data = ("\n".join(lines) + "\n").encode()
    with open(path, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as g:
            g.write(data)


def main():
    kelp, out_dir, version = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    r = subprocess.run([kelp, "-h"], capture_output=True, text=True, timeout=30)
    commands = re.findall(r"^  (\S+)\s+(.*)$", r.stdout.split("Commands:")[-1], re.M)
    if not commands:
        sys.exit(f"gen_man: no commands in `kelp -h`:\n{r.stdout}")
    write(out_dir, "kelp.1", main_page(kelp, commands, version))
    for cmd, summary in commands:
        if cmd == "version":
            continue
        write(out_dir, f"kelp-{cmd}.1", command_page(kelp, cmd, summary, version))
    write(out_dir, "mount.kelp.8", helper_page(version))


if __name__ == "__main__":
    main()
