/* observer: the store's single change hook. */
#include "store/observer.h"

static store_observer_t observer_current;
static bool observer_installed;

void store_observer_set(const store_observer_t *obs)
{
    if (obs) {
        observer_current = *obs;
        observer_installed = true;
    } else {
        observer_installed = false;
    }
}

const store_observer_t *store_observer_get(void)
{
    return observer_installed ? &observer_current : NULL;
}

static bool observer_replacing;

void store_observer_set_replacing(bool on)
{
    observer_replacing = on;
}

bool store_observer_replacing(void)
{
    return observer_replacing;
}
