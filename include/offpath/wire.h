/* offpath wire formats, one header per protocol under offpath/wire/ and
 * this one including them all: addresses and flows of both families, RoCEv2
 * transport headers with the ICRC, whole frames (IPv4, IPv6, ARP, NDP,
 * ICMP), the pcap format, reduction codes, the INC and hostar packets
 * carried in RoCEv2 UD sends, the rescue messages, DNS messages.
 * Pure functions over byte buffers: no sockets, no clocks, no allocation.
 * Every decoder bounds-checks and returns an error instead of reading past the
 * buffer. docs/wire.md shows every byte. */
#ifndef OFFPATH_WIRE_H
#define OFFPATH_WIRE_H

#include "offpath/wire/addr.h"
#include "offpath/wire/roce.h"
#include "offpath/wire/frame.h"
#include "offpath/wire/pcap.h"
#include "offpath/wire/red.h"
#include "offpath/wire/inc.h"
#include "offpath/wire/har.h"
#include "offpath/wire/rescue.h"
#include "offpath/wire/dns.h"
#include "offpath/wire/wbuf.h"
#include "offpath/wire/sc_meta.h"
#include "offpath/wire/agent.h"
#include "offpath/wire/chan.h"
#include "offpath/wire/atomic.h"
#include "offpath/wire/cm.h"

#endif
