#!/usr/bin/python3
"""Independent check of VXLAN-encapsulated RoCEv2 in a capture.

    /usr/bin/python3 vxlan_check.py VNI FILE.pcapng [FILE.pcapng ...]

For every frame scapy reads as Ether/IP/UDP: the outer UDP destination port
must be 4789 and the VXLAN header have the I flag and VNI; the inner frame
must be Ether/IP|IPv6/UDP 4791/BTH, and its ICRC is computed twice here and
compared with the ICRC on the wire: once on the raw inner bytes with the IBA
annex A17 masks written out below (no scapy, no rocemu code), once with
scapy's BTH.compute_icrc on the inner frame re-dissected on its own. The
outer IPv4 header checksum and lengths are checked too.

An inner ARP frame (a bridged VNI's) must be a whole Ethernet/ARP frame:
IPv4 over Ethernet, a request or a reply, a request broadcast; these are
counted apart. Prints "FAIL <file>:<index> <what>" per problem,
"CHECKED <n> <files>" (the RoCE frames) and "ARP <n>"; exits 1 if anything
failed or no RoCE frame was checked.
"""
import struct
import sys
import zlib

from scapy.all import ARP, IP, UDP, Ether, IPv6, raw, rdpcap  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

failures = 0


def fail(where, what):
    global failures
    failures += 1
    print(f"FAIL {where} {what}")


def icrc_raw(inner):
    """The ICRC of an inner Ethernet frame, from its bytes: CRC-32 over eight
    0xff bytes and the IP packet up to the ICRC, with the IP TOS/traffic
    class, TTL/hop limit, flow label, header checksum, UDP checksum and the
    BTH FECN/BECN/reserved byte set to ones."""
    off = 14
    if struct.unpack(">H", inner[12:14])[0] == 0x8100:
        off = 18
    ip = bytearray(inner[off:])
    if ip[0] >> 4 == 4:
        hl = (ip[0] & 0x0F) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        ip[1] = 0xFF
        ip[8] = 0xFF
        ip[10:12] = b"\xff\xff"
    else:
        hl = 40
        total = 40 + struct.unpack(">H", ip[4:6])[0]
        ip[0] |= 0x0F
        ip[1:4] = b"\xff\xff\xff"
        ip[7] = 0xFF
    ip[hl + 6:hl + 8] = b"\xff\xff"
    ip[hl + 8 + 4] = 0xFF
    covered = bytes(ip[:total - 4])
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + covered) & 0xFFFFFFFF), bytes(ip[total - 4:total])


def main():
    vni = int(sys.argv[1])
    checked = 0
    arps = 0
    for path in sys.argv[2:]:
        for i, pkt in enumerate(rdpcap(path)):
            where = f"{path.rsplit('/', 1)[-1]}:{i}"
            if not (Ether in pkt and IP in pkt and UDP in pkt):
                continue  # PFC, ARP
            outer_ip = pkt[IP]
            if outer_ip[UDP].dport != 4789:
                fail(where, f"outer UDP port {outer_ip[UDP].dport}, not 4789")
                continue
            h = outer_ip.copy()
            h.chksum = None
            if IP(raw(h)).chksum != outer_ip.chksum:
                fail(where, "outer IPv4 checksum")
            if outer_ip.flags != 2:  # DF: VTEPs must not fragment
                fail(where, f"outer IPv4 flags {outer_ip.flags}")
            udp = raw(outer_ip[UDP])
            if struct.unpack(">H", udp[4:6])[0] != outer_ip.len - outer_ip.ihl * 4:
                fail(where, "outer UDP length")
            vx = udp[8:16]
            if vx[0] != 0x08:
                fail(where, f"VXLAN flags 0x{vx[0]:02x}")
            if struct.unpack(">I", vx[4:8])[0] >> 8 != vni:
                fail(where, f"VNI {struct.unpack('>I', vx[4:8])[0] >> 8}")
            inner_bytes = udp[16:struct.unpack(">H", udp[4:6])[0]]
            if struct.unpack(">H", inner_bytes[12:14])[0] == 0x0806:
                arp = Ether(inner_bytes)
                if ARP not in arp or arp[ARP].hwtype != 1 or arp[ARP].ptype != 0x0800 or arp[ARP].hwlen != 6 \
                        or arp[ARP].plen != 4 or arp[ARP].op not in (1, 2):
                    fail(where, "inner ARP is not an IPv4-over-Ethernet request or reply")
                elif arp[ARP].op == 1 and arp.dst != "ff:ff:ff:ff:ff:ff":
                    fail(where, f"inner ARP request to {arp.dst}, not broadcast")
                elif arp.src != arp[ARP].hwsrc:
                    fail(where, "inner ARP sender MAC differs from the Ethernet source")
                arps += 1
                continue
            want, on_wire = icrc_raw(inner_bytes)
            if want != on_wire:
                fail(where, f"inner ICRC {on_wire.hex()} on the wire, {want.hex()} computed")
            inner = Ether(inner_bytes)
            if not ((IP in inner or IPv6 in inner) and UDP in inner and inner[UDP].dport == 4791 and BTH in inner):
                fail(where, "inner frame is not Ether/IP/UDP 4791/BTH")
                continue
            if inner[BTH].compute_icrc(None) != on_wire:
                fail(where, "scapy's ICRC of the inner frame differs from the wire")
            checked += 1
    print(f"CHECKED {checked} {len(sys.argv) - 2}")
    print(f"ARP {arps}")
    sys.exit(1 if failures or checked == 0 else 0)


if __name__ == "__main__":
    main()
