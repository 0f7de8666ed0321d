#!/usr/bin/python3
"""Second, independent opinion on rocemu's RoCEv2 frames: scapy's RoCE layer.

    /usr/bin/python3 scapy_check.py FRAMES.pcap EXPECT.txt

EXPECT.txt has one line per RoCE frame:
    index ipv6 vlan opcode se migreq padcount pkey fecn becn dqpn ackreq psn
(index counts frames in the pcap from 0). For each listed frame this checks
that scapy dissects Ether/[Dot1Q]/IP|IPv6/UDP/BTH, that every BTH field is
what was encoded, that scapy's ICRC equals the ICRC on the wire, that the
IP and UDP lengths agree (and the IPv4 header checksum is what scapy
computes), and that a CNP is byte for byte what scapy's cnp() builds.

scapy up to 2.5 computes the ICRC for IPv4 only (BTH.compute_icrc says
"TODO support IPv6"); later releases handle IPv6. Where the installed scapy
lacks it, the IPv6 ICRC is computed here the same way -- the masked fields set
to ones on a copy of scapy's dissected layers, CRC-32 over eight 0xff bytes
and IP..payload -- and that method is first checked against scapy's own
IPv4 result on every IPv4 frame.

Prints "FAIL <index> <what>" per problem and a "CHECKED ..." summary line;
exits 1 if anything failed.
"""
import inspect
import struct
import sys
import zlib

from scapy.all import IP, UDP, Dot1Q, Ether, IPv6, raw, rdpcap  # noqa: E402
from scapy.contrib.roce import BTH, CNP_OPCODE, CNPPadding, cnp  # noqa: E402

FIELDS = ["index", "ipv6", "vlan", "opcode", "solicited", "migreq", "padcount", "pkey", "fecn", "becn",
          "dqpn", "ackreq", "psn"]

SCAPY_HAS_IPV6_ICRC = "isinstance(ip, IPv6)" in inspect.getsource(BTH.compute_icrc)

failures = []


def fail(index, what):
    failures.append(index)
    print(f"FAIL {index} {what}")


def icrc_on_wire(pkt):
    udp = pkt[UDP]
    return raw(udp)[:udp.len][-4:]


def icrc_masked(pkt):
    """ICRC by masking a copy of the dissected IP/UDP/BTH layers (IBA annex
    A17.4.3, kernel rxe_icrc.c)."""
    v6 = IPv6 in pkt
    ip = (pkt[IPv6] if v6 else pkt[IP]).copy()
    if v6:
        ip.tc, ip.fl, ip.hlim = 0xFF, 0xFFFFF, 0xFF
        ip_len = 40 + ip.plen
    else:
        ip.tos, ip.ttl, ip.chksum = 0xFF, 0xFF, 0xFFFF
        ip_len = ip.len
    ip[UDP].chksum = 0xFFFF
    bth = ip[BTH]
    bth.fecn, bth.becn, bth.resv6 = 1, 1, 0x3F
    covered = raw(ip)[:ip_len - 4]
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + covered) & 0xFFFFFFFF)


def icrc_scapy(pkt):
    return pkt[BTH].compute_icrc(None)


def check_frame(index, pkt, exp):
    if Ether not in pkt:
        return fail(index, "no Ethernet layer")
    if (Dot1Q in pkt) != bool(exp["vlan"]):
        return fail(index, f"802.1Q tag present={Dot1Q in pkt}, expected {bool(exp['vlan'])}")
    v6 = bool(exp["ipv6"])
    if (IPv6 in pkt) != v6 or (IP in pkt) == v6:
        return fail(index, f"IP version: scapy found {'IPv6' if IPv6 in pkt else 'IPv4' if IP in pkt else 'none'}")
    if UDP not in pkt or pkt[UDP].dport != 4791:
        return fail(index, "not UDP to port 4791")
    if BTH not in pkt:
        return fail(index, "scapy found no BTH")
    bth = pkt[BTH]
    for name in FIELDS[3:]:
        got = int(getattr(bth, name))
        if got != exp[name]:
            fail(index, f"BTH {name} = {got:#x}, expected {exp[name]:#x}")
    for name in ("version", "resv6", "resv7"):
        if getattr(bth, name) != 0:
            fail(index, f"BTH {name} = {getattr(bth, name)} is not 0")

    udp = pkt[UDP]
    if v6:
        if pkt[IPv6].plen != udp.len:
            fail(index, f"IPv6 payload length {pkt[IPv6].plen} != UDP length {udp.len}")
    else:
        ip = pkt[IP]
        if ip.len != 20 + udp.len:
            fail(index, f"IPv4 total length {ip.len} != 20 + UDP length {udp.len}")
        again = ip.copy()
        del again.chksum
        if IP(raw(again)).chksum != ip.chksum:
            fail(index, f"IPv4 header checksum {ip.chksum:#06x}, scapy computes {IP(raw(again)).chksum:#06x}")

    wire = icrc_on_wire(pkt)
    if v6:
        ours = icrc_scapy(pkt) if SCAPY_HAS_IPV6_ICRC else icrc_masked(pkt)
    else:
        ours = icrc_scapy(pkt)
        if icrc_masked(pkt) != ours:
            fail(index, f"IPv6 ICRC method disagrees with scapy on IPv4: {icrc_masked(pkt).hex()} vs {ours.hex()}")
    if ours != wire:
        fail(index, f"ICRC on the wire {wire.hex()}, scapy computes {ours.hex()}")

    if exp["opcode"] == CNP_OPCODE:
        pad = bth.payload
        if not isinstance(pad, CNPPadding) or pad.reserved1 != 0 or pad.reserved2 != 0:
            fail(index, "CNP: scapy does not find 16 zero bytes of CNPPadding")
        # The same frame with scapy's own cnp() as the transport part.
        ref_l4 = cnp(exp["dqpn"])
        if v6:
            ref_l4.icrc = struct.unpack("!I", wire)[0]  # scapy <= 2.5 cannot compute it; checked above
        ref = pkt.copy()
        ref[UDP].remove_payload()
        ref = ref / ref_l4
        if raw(ref) != raw(pkt):
            fail(index, f"CNP differs from scapy's cnp(): {raw(pkt).hex()} vs {raw(ref).hex()}")
    return True


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    packets = rdpcap(sys.argv[1])
    counts = {"ipv4": 0, "ipv6": 0, "vlan": 0, "cnp": 0}
    with open(sys.argv[2]) as f:
        for line in f:
            if not line.strip():
                continue
            exp = dict(zip(FIELDS, (int(x) for x in line.split())))
            index = exp["index"]
            if index >= len(packets):
                fail(index, f"the pcap has only {len(packets)} frames")
                continue
            check_frame(index, packets[index], exp)
            counts["ipv6" if exp["ipv6"] else "ipv4"] += 1
            counts["vlan"] += exp["vlan"]
            counts["cnp"] += exp["opcode"] == CNP_OPCODE
    source = "scapy" if SCAPY_HAS_IPV6_ICRC else "backport"
    print(f"CHECKED ipv4={counts['ipv4']} ipv6={counts['ipv6']} vlan={counts['vlan']} cnp={counts['cnp']} "
          f"icrc_ipv6={source}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
