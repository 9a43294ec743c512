/* dlist: appending to and unlinking from the intrusive doubly linked lists
 * atomdb keeps (lock and lease wait queues, the contended-lease list, the
 * journal's waiters, the running operations and their clients). The node's link fields are named by the caller, so
 * one node can sit on two lists; both links are cleared. */
#ifndef ATOMDB_DLIST_H
#define ATOMDB_DLIST_H

/* Unlinks node from a list known by its head alone. */
#define DLIST_UNLINK(head, node, prev, next)                                   \
    do {                                                                       \
        if ((node)->prev)                                                      \
            (node)->prev->next = (node)->next;                                 \
        else                                                                   \
            (head) = (node)->next;                                             \
        if ((node)->next)                                                      \
            (node)->next->prev = (node)->prev;                                 \
        (node)->prev = (node)->next = NULL;                                    \
    } while (0)

/* Appends node to a list with a head and a tail. */
#define DLIST_APPEND_TAILED(head, tail, node, prev, next)                      \
    do {                                                                       \
        (node)->prev = (tail);                                                 \
        (node)->next = NULL;                                                   \
        if (tail)                                                              \
            (tail)->next = (node);                                             \
        else                                                                   \
            (head) = (node);                                                   \
        (tail) = (node);                                                       \
    } while (0)

/* Unlinks node from a list with a head and a tail. */
#define DLIST_UNLINK_TAILED(head, tail, node, prev, next)                      \
    do {                                                                       \
        if (!(node)->next)                                                     \
            (tail) = (node)->prev;                                             \
        DLIST_UNLINK(head, node, prev, next);                                  \
    } while (0)

#endif
