/*
 * list.h - an intrusive, circular, doubly linked list: the node is a member of what is listed, and an anchor
 * (a node that belongs to no element) marks the list's head and end. Nothing allocates; every operation is O(1).
 *
 * It is the project's own so that the layers below src/http/ do not name libh2o's h2o_linklist_t (README,
 * "Layout"; scripts/layers.sh). Not thread-safe: whoever shares a list across threads locks around it.
 */
#ifndef AD_LIST_H
#define AD_LIST_H

#include <stddef.h>

struct ad_list {
    struct ad_list *next, *prev; /* both NULL: a node in no list */
};

/* The struct of type type whose member member is at p. */
#define AD_CONTAINER_OF(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))

/* An anchor that is empty; for a static one, AD_LIST_INIT(name). */
#define AD_LIST_INIT(name)                                                                                             \
    {                                                                                                                  \
        &(name), &(name)                                                                                               \
    }
static inline void ad_list_init(struct ad_list *anchor)
{
    anchor->next = anchor->prev = anchor;
}

static inline int ad_list_empty(const struct ad_list *anchor)
{
    return anchor->next == anchor;
}

/* Whether node is in a list (nodes start zeroed, and ad_list_unlink zeroes them again). */
static inline int ad_list_linked(const struct ad_list *node)
{
    return node->next != NULL;
}

/* Insert node before pos: before the anchor is at the end of the list, after it (anchor->next) at its head. */
static inline void ad_list_insert(struct ad_list *pos, struct ad_list *node)
{
    node->prev = pos->prev;
    node->next = pos;
    node->prev->next = node;
    node->next->prev = node;
}

static inline void ad_list_unlink(struct ad_list *node)
{
    node->next->prev = node->prev;
    node->prev->next = node->next;
    node->next = node->prev = NULL;
}

/* Move every node of the list anchored at from before pos, in their order; from is left empty. */
static inline void ad_list_insert_list(struct ad_list *pos, struct ad_list *from)
{
    if (ad_list_empty(from))
        return;
    from->next->prev = pos->prev;
    from->prev->next = pos;
    pos->prev->next = from->next;
    pos->prev = from->prev;
    ad_list_init(from);
}

#endif
