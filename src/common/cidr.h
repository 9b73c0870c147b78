/*
 * cidr.h - IP networks (an address prefix) and the raw bytes of a socket address. Pure: no I/O.
 */
#ifndef AD_CIDR_H
#define AD_CIDR_H

#include <stdint.h>
#include <sys/socket.h>

/* One network: an IPv4 (family AF_INET, addr[0..3]) or IPv6 (AF_INET6, addr[0..15]) prefix. */
struct ad_cidr {
    int family;
    uint8_t addr[16];
    int prefix;
};

/* Parse "10.0.0.0/8", "::1/128" or a bare address (a /32 or /128). Host bits must be zero. 0 or -1. */
int ad_cidr_parse(const char *s, struct ad_cidr *out);
/* 1 when sa (AF_INET or AF_INET6) lies in n. */
int ad_cidr_contains(const struct ad_cidr *n, const struct sockaddr *sa);

/* 1 when the address bytes a, of n's family, lie in n. */
int ad_cidr_match(const struct ad_cidr *n, const uint8_t *a);
/* The raw address bytes of sa (4 for AF_INET, 16 for AF_INET6) with its family in *family; NULL for other
 * families. The bytes belong to sa. */
const uint8_t *ad_sockaddr_bytes(const struct sockaddr *sa, int *family);

#endif
