/*
 * test_ssrf.c - unit tests for src/ssrf.c: the address classifier over every refused range (IPv4, IPv6, IPv4-mapped
 * and IPv4-embedded IPv6), the allow-list, CIDR parsing, the set-time URL check, the resolver's judgement of
 * every answer, and the connect hook. No test sends a packet: addresses are only classified, the resolver is
 * asked about IP literals and `localhost` (answered from /etc/hosts), and the hook's socket is never connected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "webhook/ssrf.h"

/* Fill ss from an address literal; fails the test when it does not parse. */
static const struct sockaddr *sa_of(const char *text, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, text, &v4->sin_addr) == 1)
        v4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1)
        v6->sin6_family = AF_INET6;
    else
        fail_msg("not an address literal: %s", text);
    return (const struct sockaddr *)ss;
}

struct refusal {
    const char *addr;
    const char *why; /* a word the reason must contain */
};

/* Each special-purpose range at its first address, inside, and at its last address. */
static const struct refusal refused[] = {
    {"0.0.0.0", "this network"},
    {"0.255.255.255", "this network"},
    {"10.0.0.0", "RFC 1918"},
    {"10.1.2.3", "RFC 1918"},
    {"10.255.255.255", "RFC 1918"},
    {"100.64.0.0", "CGNAT"},
    {"100.100.0.1", "CGNAT"},
    {"100.127.255.255", "CGNAT"},
    {"127.0.0.1", "loopback"},
    {"127.0.0.2", "loopback"},
    {"127.255.255.255", "loopback"},
    {"169.254.0.0", "link-local"},
    {"169.254.255.255", "link-local"},
    {"169.254.169.254", "metadata"},
    {"168.63.129.16", "metadata"},
    {"100.100.100.200", "metadata"},
    {"172.16.0.0", "RFC 1918"},
    {"172.20.1.1", "RFC 1918"},
    {"172.31.255.255", "RFC 1918"},
    {"192.0.0.0", "IETF"},
    {"192.0.0.170", "IETF"},
    {"192.0.0.255", "IETF"},
    {"192.0.2.0", "documentation"},
    {"192.0.2.255", "documentation"},
    {"192.88.99.1", "6to4"},
    {"192.168.0.0", "RFC 1918"},
    {"192.168.255.255", "RFC 1918"},
    {"198.18.0.0", "benchmarking"},
    {"198.19.255.255", "benchmarking"},
    {"198.51.100.7", "documentation"},
    {"203.0.113.255", "documentation"},
    {"224.0.0.1", "multicast"},
    {"239.255.255.250", "multicast"},
    {"240.0.0.1", "reserved"},
    {"254.255.255.255", "reserved"},
    {"255.255.255.255", "broadcast"},
    {"::", "unspecified"},
    {"::1", "loopback"},
    {"::ffff:127.0.0.1", "IPv4-mapped"},
    {"::ffff:10.0.0.1", "IPv4-mapped"},
    {"::ffff:8.8.8.8", "IPv4-mapped"}, /* refused whatever it embeds */
    {"::ffff:0:8.8.8.8", "IPv4-translated"},
    {"::127.0.0.1", "IPv4-compatible"},
    {"::8.8.8.8", "IPv4-compatible"},
    {"64:ff9b::7f00:1", "NAT64"},
    {"64:ff9b::808:808", "NAT64"},
    {"64:ff9b:1::a00:1", "NAT64"},
    {"100::1", "discard"},
    {"2001::1", "Teredo"},
    {"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
    {"2001:db8::1", "documentation"},
    {"2001:2::1", "IETF"},
    {"2001:10::1", "IETF"},
    {"2001:1ff:ffff::1", "IETF"},
    {"2002:7f00:1::1", "6to4"},
    {"2002:808:808::1", "6to4"},
    {"3fff::1", "documentation"},
    {"5f00::1", "outside 2000::/3"},
    {"fc00::1", "unique local"},
    {"fdff:ffff::1", "unique local"},
    {"fd00:ec2::254", "metadata"},
    {"fe80::1", "link-local"},
    {"febf:ffff::1", "link-local"},
    {"fec0::1", "site-local"},
    {"ff02::1", "multicast"},
    {"ff0e::101", "multicast"},
    {"1::1", "outside 2000::/3"},
    {"4000::1", "outside 2000::/3"},
    {"e000::1", "outside 2000::/3"},
};

static void test_every_special_range_is_refused(void **state)
{
    struct sockaddr_storage ss;
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        const char *why = ad_ssrf_classify(sa_of(refused[i].addr, &ss));
        if (why == NULL)
            fail_msg("%s was classified global", refused[i].addr);
        if (strstr(why, refused[i].why) == NULL)
            fail_msg("%s: reason \"%s\" does not mention \"%s\"", refused[i].addr, why, refused[i].why);
    }
}

static void test_global_addresses_pass(void **state)
{
    /* Just outside the edges of the refused ranges, and well-known public resolvers. */
    static const char *const global[] = {
        "1.1.1.1",
        "8.8.8.8",
        "9.255.255.255",
        "11.0.0.0",
        "100.63.255.255",
        "100.128.0.0",
        "126.255.255.255",
        "128.0.0.0",
        "169.253.255.255",
        "169.255.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.0.1.0",
        "192.0.3.0",
        "192.88.98.255",
        "192.167.255.255",
        "192.169.0.0",
        "198.17.255.255",
        "198.20.0.0",
        "223.255.255.255",
        "2606:4700:4700::1111",
        "2001:4860:4860::8888",
        "2001:200::1",
        "2003::1",
        "2a00:1450:4001::1",
        "3ffe::1",
        "2400:cb00::1",
    };
    struct sockaddr_storage ss;
    for (size_t i = 0; i < sizeof(global) / sizeof(global[0]); i++) {
        const char *why = ad_ssrf_classify(sa_of(global[i], &ss));
        if (why != NULL)
            fail_msg("%s refused as %s", global[i], why);
    }
}

static void test_cidr_parse(void **state)
{
    struct ad_cidr n;
    assert_int_equal(ad_cidr_parse("127.0.0.0/8", &n), 0);
    assert_int_equal(n.family, AF_INET);
    assert_int_equal(n.prefix, 8);
    assert_int_equal(ad_cidr_parse("::1/128", &n), 0);
    assert_int_equal(n.family, AF_INET6);
    assert_int_equal(n.prefix, 128);
    assert_int_equal(ad_cidr_parse("10.1.2.3", &n), 0);
    assert_int_equal(n.prefix, 32);
    assert_int_equal(ad_cidr_parse("0.0.0.0/0", &n), 0);
    assert_int_equal(ad_cidr_parse("fd00::/8", &n), 0);
    static const char *const bad[] = {"",         "10.0.0.1/8", "1.2.3.4/33", "::1/129",   "abc",        "1.2.3.4/",
                                      "1.2.3/24", "/8",         "1.2.3.4/-1", "fe80::1/8", "1.2.3.4/8x", "::1/+1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (ad_cidr_parse(bad[i], &n) == 0)
            fail_msg("parsed \"%s\"", bad[i]);
}

static void test_allow_list_opens_only_its_networks(void **state)
{
    struct ad_cidr nets[2];
    assert_int_equal(ad_cidr_parse("127.0.0.0/8", &nets[0]), 0);
    assert_int_equal(ad_cidr_parse("::1/128", &nets[1]), 0);
    struct ad_ssrf g = {nets, 2}, none = {NULL, 0};
    struct sockaddr_storage ss;
    char why[200];
    assert_int_equal(ad_ssrf_check_addr(&g, sa_of("127.0.0.1", &ss), why, sizeof(why)), 0);
    assert_int_equal(ad_ssrf_check_addr(&g, sa_of("127.0.0.2", &ss), why, sizeof(why)), 0);
    assert_int_equal(ad_ssrf_check_addr(&g, sa_of("::1", &ss), why, sizeof(why)), 0);
    assert_int_equal(ad_ssrf_check_addr(&g, sa_of("8.8.8.8", &ss), why, sizeof(why)), 0);
    assert_int_equal(ad_ssrf_check_addr(&g, sa_of("10.0.0.1", &ss), why, sizeof(why)), -1);
    assert_non_null(strstr(why, "10.0.0.1"));
    assert_non_null(strstr(why, "allowNetworks"));
    assert_int_equal(ad_ssrf_check_addr(&g, sa_of("::ffff:127.0.0.1", &ss), why, sizeof(why)), -1);
    assert_int_equal(ad_ssrf_check_addr(&g, sa_of("::2", &ss), why, sizeof(why)), -1);
    assert_int_equal(ad_ssrf_check_addr(&none, sa_of("127.0.0.1", &ss), why, sizeof(why)), -1);
    assert_non_null(strstr(why, "loopback"));
    assert_int_equal(ad_ssrf_check_addr(&none, sa_of("::1", &ss), why, sizeof(why)), -1);
}

static void test_url_check_at_set_time(void **state)
{
    struct ad_cidr nets[2];
    ad_cidr_parse("127.0.0.0/8", &nets[0]);
    ad_cidr_parse("::1/128", &nets[1]);
    struct ad_ssrf allow = {nets, 2}, none = {NULL, 0}, v4only = {nets, 1};
    char why[200];
    static const char *const refused_urls[] = {
        "http://127.0.0.1:8080/hook", "http://127.0.0.2/",
        "http://[::1]:9/x",           "http://localhost/",
        "http://LOCALHOST:1/",        "http://localhost./",
        "http://api.localhost/x",     "http://[::ffff:127.0.0.1]/",
        "http://10.0.0.1/",           "https://169.254.169.254/latest/meta-data/",
        "http://[fe80::1%25eth0]/",   "http://0.0.0.0/",
    };
    for (size_t i = 0; i < sizeof(refused_urls) / sizeof(refused_urls[0]); i++)
        if (ad_ssrf_check_url(&none, refused_urls[i], why, sizeof(why)) != -1)
            fail_msg("%s was not refused", refused_urls[i]);
    /* A name other than localhost can only be judged when it is resolved. */
    assert_int_equal(ad_ssrf_check_url(&none, "https://hooks.example.com/x", why, sizeof(why)), 0);
    assert_int_equal(ad_ssrf_check_url(&allow, "http://127.0.0.1:8080/hook", why, sizeof(why)), 0);
    assert_int_equal(ad_ssrf_check_url(&allow, "http://[::1]:8080/hook", why, sizeof(why)), 0);
    assert_int_equal(ad_ssrf_check_url(&allow, "http://localhost:8080/hook", why, sizeof(why)), 0);
    /* localhost is both loopback addresses: allowing one family is not enough. */
    assert_int_equal(ad_ssrf_check_url(&v4only, "http://localhost:8080/hook", why, sizeof(why)), -1);
    assert_int_equal(ad_ssrf_check_url(&allow, "http://10.0.0.1/", why, sizeof(why)), -1);
    assert_int_equal(ad_ssrf_check_url(&none, "not a url", why, sizeof(why)), -1);
}

static void test_url_host(void **state)
{
    char host[256];
    long port;
    assert_int_equal(ad_ssrf_url_host("http://[::1]:8080/x?y", host, sizeof(host), &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 8080);
    assert_int_equal(ad_ssrf_url_host("https://Hooks.Example.COM/a", host, sizeof(host), &port), 0);
    assert_string_equal(host, "hooks.example.com");
    assert_int_equal(port, 443);
    assert_int_equal(ad_ssrf_url_host("http://127.0.0.1/", host, sizeof(host), &port), 0);
    assert_int_equal(port, 80);
    assert_int_equal(ad_ssrf_url_host("http://", host, sizeof(host), &port), -1);
}

static pthread_mutex_t woke_mu = PTHREAD_MUTEX_INITIALIZER;
static int woke;

static void on_wake(void *arg)
{
    pthread_mutex_lock(&woke_mu);
    woke++;
    pthread_mutex_unlock(&woke_mu);
}

/* Ask until the answer is in (the resolver thread wakes us). */
static enum ad_resolve lookup(struct ad_resolver *r, const char *host, char *addrs, char *why)
{
    for (int i = 0; i < 500; i++) {
        enum ad_resolve s = ad_resolver_lookup(r, host, addrs, 1024, why, 256);
        if (s != AD_RESOLVE_PENDING)
            return s;
        usleep(10000);
    }
    fail_msg("no answer for %s", host);
    return AD_RESOLVE_PENDING;
}

static void test_resolver_checks_every_answer(void **state)
{
    struct ad_cidr nets[2];
    ad_cidr_parse("127.0.0.0/8", &nets[0]);
    ad_cidr_parse("::1/128", &nets[1]);
    struct ad_ssrf none = {NULL, 0}, allow = {nets, 2}, v4only = {nets, 1};
    char addrs[1024], why[256];

    struct ad_resolver *r = ad_resolver_new(&none, on_wake, NULL);
    /* Literals are judged at once, without the resolver thread. */
    assert_int_equal(ad_resolver_lookup(r, "127.0.0.1", addrs, sizeof(addrs), why, sizeof(why)), AD_RESOLVE_REFUSED);
    assert_non_null(strstr(why, "loopback"));
    assert_int_equal(ad_resolver_lookup(r, "::1", addrs, sizeof(addrs), why, sizeof(why)), AD_RESOLVE_REFUSED);
    /* A name resolving to loopback (from /etc/hosts: no DNS query) is refused, and the refusal is cached. */
    assert_int_equal(lookup(r, "localhost", addrs, why), AD_RESOLVE_REFUSED);
    assert_non_null(strstr(why, "localhost resolves to"));
    assert_int_equal(ad_resolver_lookup(r, "localhost", addrs, sizeof(addrs), why, sizeof(why)), AD_RESOLVE_REFUSED);
    /* A numeric host that is not a literal (inet_aton style) still resolves to the address it means. */
    assert_int_equal(lookup(r, "2130706433", addrs, why), AD_RESOLVE_REFUSED);
    assert_non_null(strstr(why, "127.0.0.1"));
    ad_resolver_free(r);

    r = ad_resolver_new(&allow, on_wake, NULL);
    assert_int_equal(ad_resolver_lookup(r, "127.0.0.2", addrs, sizeof(addrs), why, sizeof(why)), AD_RESOLVE_OK);
    assert_string_equal(addrs, "127.0.0.2");
    assert_int_equal(ad_resolver_lookup(r, "::1", addrs, sizeof(addrs), why, sizeof(why)), AD_RESOLVE_OK);
    assert_string_equal(addrs, "[::1]");
    assert_int_equal(lookup(r, "localhost", addrs, why), AD_RESOLVE_OK);
    assert_non_null(strstr(addrs, "127.0.0.1"));
    ad_resolver_free(r);

    /* If the name also has an answer outside the allow-list, the whole name is refused. */
    FILE *hosts = fopen("/etc/hosts", "r");
    char line[512];
    int has_v6_localhost = 0;
    while (hosts != NULL && fgets(line, sizeof(line), hosts) != NULL)
        if (strncmp(line, "::1", 3) == 0 && strstr(line, "localhost") != NULL)
            has_v6_localhost = 1;
    if (hosts != NULL)
        fclose(hosts);
    if (has_v6_localhost) {
        r = ad_resolver_new(&v4only, on_wake, NULL);
        assert_int_equal(lookup(r, "localhost", addrs, why), AD_RESOLVE_REFUSED);
        assert_non_null(strstr(why, "::1"));
        ad_resolver_free(r);
    }
    pthread_mutex_lock(&woke_mu);
    assert_true(woke > 0);
    pthread_mutex_unlock(&woke_mu);
}

static void test_connect_hook_checks_the_dialled_address(void **state)
{
    struct ad_cidr nets[1];
    ad_cidr_parse("127.0.0.0/8", &nets[0]);
    struct ad_ssrf none = {NULL, 0}, allow = {nets, 1};
    struct ad_ssrf_dial dial = {.guard = &none};
    struct curl_sockaddr a = {.family = AF_INET, .socktype = SOCK_STREAM, .protocol = IPPROTO_TCP};
    struct sockaddr_in *v4 = (struct sockaddr_in *)&a.addr;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(9);
    inet_pton(AF_INET, "127.0.0.1", &v4->sin_addr);
    a.addrlen = sizeof(*v4);
    assert_int_equal(ad_ssrf_opensocket(&dial, CURLSOCKTYPE_IPCXN, &a), CURL_SOCKET_BAD);
    assert_non_null(strstr(dial.why, "127.0.0.1 is loopback"));
    /* Allowed: a socket comes back (it is closed here, never connected). */
    dial = (struct ad_ssrf_dial){.guard = &allow};
    curl_socket_t fd = ad_ssrf_opensocket(&dial, CURLSOCKTYPE_IPCXN, &a);
    assert_true(fd != CURL_SOCKET_BAD);
    assert_string_equal(dial.why, "");
    close(fd);
    /* Other kinds of socket are never opened. */
    assert_int_equal(ad_ssrf_opensocket(&dial, CURLSOCKTYPE_ACCEPT, &a), CURL_SOCKET_BAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_special_range_is_refused),
        cmocka_unit_test(test_global_addresses_pass),
        cmocka_unit_test(test_cidr_parse),
        cmocka_unit_test(test_allow_list_opens_only_its_networks),
        cmocka_unit_test(test_url_check_at_set_time),
        cmocka_unit_test(test_url_host),
        cmocka_unit_test(test_resolver_checks_every_answer),
        cmocka_unit_test(test_connect_hook_checks_the_dialled_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
