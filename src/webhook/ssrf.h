/*
 * ssrf.h - the guard that keeps webhook deliveries away from the daemon's own network: an address
 * classifier, the operator's allow-list, a resolver that checks every DNS answer of a name, and the libcurl
 * hook that checks the exact address about to be connected.
 *
 * A destination is refused when any address it resolves to is not globally routable (loopback, RFC 1918,
 * link-local, CGNAT, multicast, cloud metadata, IPv4-mapped or IPv4-embedded IPv6, documentation and
 * other special-purpose ranges) unless the address lies in an allow-listed network. The delivery pins
 * curl to the addresses that were checked (CURLOPT_RESOLVE) and checks again in CURLOPT_OPENSOCKETFUNCTION,
 * so there is no window between the check and the connect (DNS rebinding). This file sends no traffic.
 */
#ifndef AD_SSRF_H
#define AD_SSRF_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "common/cidr.h"

/* Why sa is not a global unicast address ("loopback", "private (RFC 1918)", ...), or NULL when it is.
 * Static storage. Pure: no I/O. */
const char *ad_ssrf_classify(const struct sockaddr *sa);

/* The operator's allow-list. */
struct ad_ssrf {
    const struct ad_cidr *allow;
    size_t nallow;
};

/* 0 when the guard lets sa be dialled, else -1 with the reason ("127.0.0.1 is loopback") in why. */
int ad_ssrf_check_addr(const struct ad_ssrf *g, const struct sockaddr *sa, char *why, size_t whylen);

/* The host of url, lowercased, without IPv6 brackets or zone, into host; its port (the scheme's default when
 * absent) into *port. 0, or -1 when the URL does not parse (libcurl's URL parser decides). */
int ad_ssrf_url_host(const char *url, char *host, size_t hostlen, long *port);

/* The check that can be made when a URL is set, without DNS: an IP-literal host, and `localhost` (and
 * *.localhost, RFC 6761) as its loopback addresses. 0 when nothing is known against the URL, else -1 with the
 * reason in why. Other names are checked when dialled. */
int ad_ssrf_check_url(const struct ad_ssrf *g, const char *url, char *why, size_t whylen);

/*
 * The resolver: getaddrinfo on a thread of its own, so a slow DNS server never stalls deliveries, with a
 * short-lived cache of the checked answers. wake(arg) runs on the resolver thread when an answer arrives.
 */
struct ad_resolver;
struct ad_resolver *ad_resolver_new(const struct ad_ssrf *g, void (*wake)(void *arg), void *arg);
void ad_resolver_free(struct ad_resolver *r);

enum ad_resolve { AD_RESOLVE_PENDING, AD_RESOLVE_OK, AD_RESOLVE_REFUSED };
/*
 * Look host up. PENDING: an answer is on its way (wake will run). OK: addrs holds the checked addresses as
 * curl's CURLOPT_RESOLVE list ("1.2.3.4,[2001:db8::1]"). REFUSED: why says which answer was refused or that
 * the name does not resolve. IP literals are answered at once. Delivery thread only.
 */
enum ad_resolve ad_resolver_lookup(struct ad_resolver *r, const char *host, char *addrs, size_t addrslen, char *why,
                                   size_t whylen);

/* What CURLOPT_OPENSOCKETFUNCTION needs: the guard, and where a refusal is written. */
struct ad_ssrf_dial {
    const struct ad_ssrf *guard;
    char why[160]; /* empty unless a connect was refused */
};
/* The CURLOPT_OPENSOCKETFUNCTION hook; clientp is a struct ad_ssrf_dial. */
curl_socket_t ad_ssrf_opensocket(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr);

#endif
