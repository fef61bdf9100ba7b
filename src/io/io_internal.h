/* Internal to src/io: helpers the backends share. */
#ifndef OFFPATH_IO_INTERNAL_H
#define OFFPATH_IO_INTERNAL_H

#include <stdint.h>

#include "offpath/io.h"

/* The MTU of interface ifname (an ioctl on any socket fd); 0 if unknown. */
uint32_t io_link_mtu(int fd, const char *ifname);

#endif
