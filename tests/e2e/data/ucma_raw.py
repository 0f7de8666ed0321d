#!/usr/bin/env python3
"""Raw ucma commands on /dev/infiniband/rdma_cm, as librdmacm writes them
(struct rdma_ucm_cmd_hdr + command, <rdma/rdma_user_cm.h>), to check what
librdmacm never does: short response buffers, descriptors duplicated or
closed under the channel, a blocking GET_EVENT whose engine dies. Run under
`rocemu exec NODE --`; each check prints "ok NAME" or "FAIL NAME: why" and
the exit status counts the failures.

  ucma_raw.py enospc dup close_range closefrom subprocess fork_threads
  ucma_raw.py block        # prints "waiting PID", then blocks in GET_EVENT
"""
import ctypes
import errno
import fcntl
import os
import struct
import subprocess as subprocess_module
import sys
import threading

PATH = "/dev/infiniband/rdma_cm"
CREATE_ID, DESTROY_ID, QUERY_ROUTE, INIT_QP_ATTR, GET_EVENT = 0, 1, 5, 11, 12
RDMA_PS_TCP, IBV_QPT_RC = 0x0106, 2
# Response sizes (x86-64): rdma_ucm_query_route_resp up to ibdev_index, and
# whole; ib_uverbs_qp_attr; rdma_ucm_event_resp without reserved and ece.
QUERY_ROUTE_MIN, QUERY_ROUTE_FULL = 200, 208
QP_ATTR = 144
EVENT_MIN = 324

failures = 0
libc = ctypes.CDLL(None, use_errno=True)


def check(name, cond, why=""):
    global failures
    if cond:
        print("ok", name, flush=True)
    else:
        failures += 1
        print("FAIL", name + ":", why, flush=True)


def command(fd, cmd, body, out):
    """Writes one command; returns None or the errno it failed with."""
    try:
        os.write(fd, struct.pack("<IHH", cmd, len(body), out) + body)
        return None
    except OSError as e:
        return e.errno


def create_id(fd, out=4):
    resp = ctypes.create_string_buffer(8)
    err = command(fd, CREATE_ID, struct.pack("<QQHB5x", 1, ctypes.addressof(resp), RDMA_PS_TCP, IBV_QPT_RC), out)
    return err, struct.unpack_from("<I", resp.raw)[0]


def destroy_id(fd, ident, out=4):
    resp = ctypes.create_string_buffer(8)
    return command(fd, DESTROY_ID, struct.pack("<QII", ctypes.addressof(resp), ident, 0), out)


def query_route(fd, ident, out):
    resp = ctypes.create_string_buffer(QUERY_ROUTE_FULL)
    return command(fd, QUERY_ROUTE, struct.pack("<QII", ctypes.addressof(resp), ident, 0), out)


def get_event(fd, out):
    resp = ctypes.create_string_buffer(512)
    return command(fd, GET_EVENT, struct.pack("<Q", ctypes.addressof(resp)), out)


def enospc():
    fd = os.open(PATH, os.O_RDWR)
    err, _ = create_id(fd, out=3)
    check("CREATE_ID with out 3 is ENOSPC", err == errno.ENOSPC, f"errno {err}")
    err, ident = create_id(fd)
    check("CREATE_ID with out 4 makes an id", err is None, f"errno {err}")
    err = query_route(fd, ident, QUERY_ROUTE_MIN - 1)
    check("QUERY_ROUTE short of ibdev_index is ENOSPC", err == errno.ENOSPC, f"errno {err}")
    err = query_route(fd, ident, QUERY_ROUTE_MIN)
    check("QUERY_ROUTE without ibdev_index is answered", err is None, f"errno {err}")
    resp = ctypes.create_string_buffer(QP_ATTR)
    err = command(fd, INIT_QP_ATTR, struct.pack("<QII", ctypes.addressof(resp), ident, 1), QP_ATTR - 1)
    check("INIT_QP_ATTR one byte short is ENOSPC", err == errno.ENOSPC, f"errno {err}")
    # A blocking channel with no event: ENOSPC at once, not a wait.
    err = get_event(fd, EVENT_MIN - 1)
    check("GET_EVENT short on an empty blocking channel is ENOSPC", err == errno.ENOSPC, f"errno {err}")
    err = destroy_id(fd, ident, out=3)
    check("DESTROY_ID with out 3 is ENOSPC", err == errno.ENOSPC, f"errno {err}")
    err = destroy_id(fd, ident)
    check("the id outlived the short DESTROY_ID", err is None, f"errno {err}")
    os.close(fd)


def dup():
    # Through the C library's dup family (ctypes), as a C program calls
    # them: Python's os.dup is an fcntl(F_DUPFD_CLOEXEC).
    fd = os.open(PATH, os.O_RDWR)
    copy = libc.dup(fd)
    err, ident = create_id(copy)
    check("dup() of the channel is the channel", err is None, f"errno {err}")
    os.close(fd)
    check("the id lives while a copy does", destroy_id(copy, ident) is None)
    # dup2 over the channel's descriptor closes it there: the number is
    # then the program's pipe (its read end: a write fails EBADF).
    r, w = os.pipe()
    libc.dup2(r, copy)
    err = command(copy, CREATE_ID, b"\0" * 24, 4)
    check("dup2 over the channel: the number is the program's file", err == errno.EBADF, f"errno {err}")
    os.close(copy)
    # dup3 of the channel onto another number: that number is the channel.
    fd = os.open(PATH, os.O_RDWR)
    libc.dup3(fd, w, os.O_CLOEXEC)
    err, ident = create_id(w)
    check("dup3 of the channel is the channel", err is None, f"errno {err}")
    check("its id is the channel's", destroy_id(fd, ident) is None)
    os.close(fd)
    os.close(w)
    os.close(r)


def closed_under(name, close):
    null = os.open("/dev/null", os.O_WRONLY)  # below the channel: closefrom spares it
    fd = os.open(PATH, os.O_RDWR)
    close(fd)
    # The program's next file takes the number (fcntl F_DUPFD: the lowest
    # free one from there; not a call the provider watches). A write there
    # is the program's, not a command.
    other = fcntl.fcntl(null, fcntl.F_DUPFD, fd)
    os.close(null)
    if other != fd:
        check(f"{name}: the number is the program's again", False, f"F_DUPFD gave {other}, not {fd}")
    else:
        try:
            n = os.write(other, b"x" * 24)
            check(f"{name}: the number is the program's again", n == 24, f"wrote {n}")
        except OSError as e:
            check(f"{name}: the number is the program's again", False, f"errno {e.errno}")
    os.close(other)


def close_range():
    closed_under("close_range", lambda fd: libc.close_range(fd, fd, 0))


def closefrom():
    closed_under("closefrom", lambda fd: libc.closefrom(fd))


def subprocess():
    # CPython 3.11 starts a program with vfork(), then, in the child (in
    # the parent's memory), close_range(3, ~0U, 0) and dup2: the child's
    # closes are its own, the parent's channel stays whole.
    fd = os.open(PATH, os.O_RDWR)
    err, ident = create_id(fd)
    check("CREATE_ID before a subprocess", err is None, f"errno {err}")
    subprocess_module.run(["/bin/true"], check=True)
    subprocess_module.run(["/bin/true"], check=True, close_fds=False, stdout=subprocess_module.DEVNULL)
    err, _ = create_id(fd)
    check("CREATE_ID after a subprocess (vfork, close_range, dup2 in the child)", err is None, f"errno {err}")
    check("the id made before the subprocess lives", destroy_id(fd, ident) is None)
    os.close(fd)


def fork_threads():
    # A thread reads and writes a pipe (each call looks its descriptor up
    # among the channels) while the main thread forks children that dup2
    # and close, as every fork+exec child does with its stdio: none may
    # find the provider's table locked by a thread that is not in it.
    fd = os.open(PATH, os.O_RDWR)
    r, w = os.pipe()
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            os.write(w, b"x")
            os.read(r, 1)

    t = threading.Thread(target=hammer)
    t.start()
    forks = 2000
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:
            libc.dup2(2, 1)
            libc.close(1)
            os._exit(0)
        os.waitpid(pid, 0)  # a deadlocked child hangs the check: the test's timeout sees it
    stop.set()
    t.join()
    err, _ = create_id(fd)
    check(f"{forks} fork children dup2 and close while a thread reads and writes", err is None, f"errno {err}")
    os.close(fd)
    os.close(r)
    os.close(w)


def open_descriptors():
    """The numbers open below 1024, found without opening one (as listing /proc/self/fd would)."""
    found = set()
    for n in range(1024):
        try:
            os.fstat(n)
            found.add(n)
        except OSError:
            pass
    return found


def close_range_socket():
    # close_range over a channel's descriptor and its connection to the
    # engine (the other descriptor the open made) closes both; the channel
    # lives on in a copy. Its release must not close the connection's
    # number again: by then it is the program's next file.
    before = open_descriptors()
    fd = os.open(PATH, os.O_RDWR)
    made = open_descriptors() - before - {fd}
    if len(made) != 1:
        check("close_range: the channel's connection is one descriptor", False, f"new descriptors {made}")
        os.close(fd)
        return
    sock = made.pop()
    libc.dup2(fd, 100)
    libc.close_range(min(sock, fd), max(sock, fd), 0)
    other = os.open("/dev/null", os.O_WRONLY)  # the lowest free number: the connection's
    libc.close(100)  # the channel's last descriptor
    try:
        os.fstat(other)
        check("close_range: releasing the channel closes nothing of the program's", True)
        os.close(other)
    except OSError as e:
        check("close_range: releasing the channel closes nothing of the program's", False,
              f"file {other} (was the connection {sock}) closed: errno {e.errno}")


def block():
    fd = os.open(PATH, os.O_RDWR)
    err, _ = create_id(fd)
    check("CREATE_ID", err is None, f"errno {err}")
    # The test waits until this process sleeps in GET_EVENT's wait
    # (/proc/PID/syscall shows poll) before it kills the engine.
    print("waiting", os.getpid(), flush=True)
    err = get_event(fd, 512)
    check("a blocking GET_EVENT whose engine died fails with EIO", err == errno.EIO, f"errno {err}")


if __name__ == "__main__":
    checks = {"enospc": enospc, "dup": dup, "close_range": close_range, "closefrom": closefrom, "block": block,
              "subprocess": subprocess, "fork_threads": fork_threads, "close_range_socket": close_range_socket}
    for arg in sys.argv[1:]:
        checks[arg]()
    sys.exit(min(failures, 100))
