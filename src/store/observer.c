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
