"""Inside the sandbox's fresh namespaces (see sandbox.py): lock the file system, drop privileges, set
the rlimits, then exec the model's code. Runs as a standalone script (``python -I``), stdlib only.

argv: staging_dir python setpriv memory_mb workdir_mb cpu_seconds max_processes max_file_bytes user
(user: ``nobody`` for a model's code; ``keep`` for roll's own code that must read roll's interpreter and
package, e.g. an env server: it keeps the caller's uid, still without any capability)
"""

import ctypes
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_NOATIME, MS_NODIRATIME, MS_REMOUNT, MS_BIND, MS_RELATIME = 1024, 2048, 32, 4096, 1 << 21
MS_REC, MS_PRIVATE = 1 << 14, 1 << 18
# flags a remount must repeat: inside a user namespace the kernel refuses to clear locked ones
_KEPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
               "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
NOBODY = 65534

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source, target, fstype, flags, data=None):
    encode = lambda s: None if s is None else s.encode()  # noqa: E731
    if _libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def _mount_points():
    """(mount point, per-mount flags) from /proc/self/mountinfo, parents before children."""
    points = []
    with open("/proc/self/mountinfo") as info:
        for line in info:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")  # octal escapes such as \040
            flags = 0
            for option in fields[5].split(","):
                flags |= _KEPT_FLAGS.get(option, 0)
            points.append((point, flags))
    return points


def lock_file_system(workdir, workdir_mb):
    files = {name: open(os.path.join(workdir, name), "rb").read() for name in os.listdir(workdir)}
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here propagates to the host
    for point, flags in _mount_points():
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError:
            if point in ("/", "/tmp", "/dev/shm", "/var/tmp", os.path.expanduser("~")):
                raise  # a writable place left open would defeat the sandbox: refuse to run
    # the work dir: a fresh size-capped tmpfs over the staging dir, holding copies of its files
    _mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={workdir_mb}m,mode=0700")
    for name, data in files.items():
        with open(os.path.join(workdir, name), "wb") as out:
            out.write(data)


def privilege_drop_args(workdir, user):
    """setpriv options for the code: no capabilities ever (so it cannot undo the read-only mounts),
    and the user nobody where roll runs as real root (a user namespace maps only our own uid)."""
    args = ["--no-new-privs", "--bounding-set=-all", "--inh-caps=-all"]
    if user == "nobody" and os.getuid() == 0 and _maps_nobody():
        for root, dirs, names in os.walk(workdir):
            for name in [root] + [os.path.join(root, n) for n in dirs + names]:
                os.chown(name, NOBODY, NOBODY)
        args += [f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return args


def _maps_nobody():
    with open("/proc/self/uid_map") as uid_map:
        for line in uid_map:
            inside, _outside, count = (int(x) for x in line.split())
            if inside <= NOBODY < inside + count:
                return True
    return False


def main():
    workdir, python, setpriv, memory_mb, workdir_mb, cpu_s, max_processes, max_file_bytes, user = sys.argv[1:10]
    lock_file_system(workdir, int(workdir_mb))
    drop_args = privilege_drop_args(workdir, user)
    os.chdir(workdir)
    limits = {
        resource.RLIMIT_AS: int(memory_mb) * 2**20,
        resource.RLIMIT_CPU: int(cpu_s),
        resource.RLIMIT_FSIZE: int(max_file_bytes),
        resource.RLIMIT_NPROC: int(max_processes),
        resource.RLIMIT_NOFILE: 64,
        resource.RLIMIT_CORE: 0,
    }
    for kind, value in limits.items():
        resource.setrlimit(kind, (value, value))
    env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
    os.execve(setpriv, [setpriv, *drop_args, "--", python, "-I", "main.py"], env)


if __name__ == "__main__":
    main()
