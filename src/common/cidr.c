/*
 * cidr.c - IP networks: parsing "10.0.0.0/8" or "::1/128" and asking whether an address lies in one (cidr.h).
 *
 * Pure: no I/O. The SSRF guard (webhook/ssrf.c) classifies addresses with these, and the configuration
 * (core/config.c) parses the operator's allow-list with them.
 */
#include "common/cidr.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

int ad_cidr_parse(const char *s, struct ad_cidr *out)
{
    char buf[INET6_ADDRSTRLEN + 8];
    const char *slash = strchr(s, '/');
    size_t alen = slash != NULL ? (size_t)(slash - s) : strlen(s);
    if (alen == 0 || alen >= INET6_ADDRSTRLEN)
        return -1;
    memcpy(buf, s, alen);
    buf[alen] = '\0';
    memset(out, 0, sizeof(*out));
    int bits;
    if (inet_pton(AF_INET, buf, out->addr) == 1) {
        out->family = AF_INET;
        bits = 32;
    } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        out->family = AF_INET6;
        bits = 128;
    } else {
        return -1;
    }
    long long prefix = bits;
    if (slash != NULL && ad_parse_int(slash + 1, strlen(slash + 1), 0, bits, &prefix) != 0)
        return -1;
    out->prefix = (int)prefix;
    for (int b = out->prefix; b < bits; b++)
        if (out->addr[b / 8] & (0x80 >> (b % 8)))
            return -1; /* host bits set: "10.1.2.3/8" is almost always a typo */
    return 0;
}

const uint8_t *ad_sockaddr_bytes(const struct sockaddr *sa, int *family)
{
    *family = sa->sa_family;
    if (sa->sa_family == AF_INET)
        return (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
    if (sa->sa_family == AF_INET6)
        return ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    return NULL;
}

int ad_cidr_match(const struct ad_cidr *n, const uint8_t *a)
{
    int full = n->prefix / 8, rest = n->prefix % 8;
    if (memcmp(n->addr, a, (size_t)full) != 0)
        return 0;
    return rest == 0 || ((n->addr[full] ^ a[full]) & (0xff << (8 - rest))) == 0;
}

int ad_cidr_contains(const struct ad_cidr *n, const struct sockaddr *sa)
{
    int family;
    const uint8_t *a = ad_sockaddr_bytes(sa, &family);
    return a != NULL && family == n->family && ad_cidr_match(n, a);
}
