/* fiber: coroutines on their own stacks (mmap'd, with a guard page, kept
 * in a small pool; switched by a few instructions on x86-64, by ucontext
 * elsewhere, where swapcontext costs a system call per switch), the slice
 * clock, kill and deadline checks, and frees deferred while a suspended
 * fiber may still point at what is freed. */
#include "util/fiber.h"

#include <string.h>
#include <sys/mman.h>
#include <stdint.h>
#include <ucontext.h>
#include <unistd.h>
#include <uv.h>

#include <bson/bson.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define FIBER_ASAN 1
#endif

/* Virtual size of a fiber stack; pages are committed only when touched
 * (deep expression recursion and ASan's redzones need room). */
#define FIBER_STACK_SIZE (8u * 1024 * 1024)
/* fiber_check reads the clock once per this many calls (a power of 2). */
#define FIBER_CLOCK_EVERY 16
/* Stacks kept for reuse. */
#define FIBER_POOL_MAX 8

#if defined(__x86_64__)
#define FIBER_ASM_SWITCH 1
/* fiber_swap_x86_64(from, to): pushes the callee-saved registers, stores
 * the stack pointer in *from, loads `to` and pops its registers (System V
 * ABI: rbx, rbp, r12-r15; MXCSR and the x87 control word are never
 * changed by atomdb, so they need no saving). */
void fiber_swap_x86_64(void **from, void *to);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl fiber_swap_x86_64\n"
        ".hidden fiber_swap_x86_64\n"
        ".type fiber_swap_x86_64, @function\n"
        "fiber_swap_x86_64:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size fiber_swap_x86_64, .-fiber_swap_x86_64\n");
#endif

/* A saved place to switch back to: a stack pointer, or a ucontext. */
#ifdef FIBER_ASM_SWITCH
typedef void *fiber_ctx_t;
#else
typedef ucontext_t fiber_ctx_t;
#endif

struct fiber {
    fiber_ctx_t ctx;        /* the fiber's own */
    fiber_ctx_t caller;     /* where fiber_resume was called */
    void (*fn)(void *arg);
    void *arg;
    void *stack;            /* FIBER_STACK_SIZE bytes, guard page first */
    bool started;
    bool finished;
    bool counted;           /* counted in fiber_live (has yielded) */
    int no_yield;           /* fiber_no_yield_begin depth */
    int kill_code;          /* 0: not killed */
    char kill_msg[160];
    uint64_t deadline_ns;   /* 0: none */
    uint64_t slice_start_ns;
    uint64_t slice_ns;      /* this fiber's current slice (fiber_set_slice) */
    uint64_t created_ns;
    uint64_t yields;
    uint32_t ticks;         /* checks since the clock was last read */
#ifdef FIBER_ASAN
    const void *caller_bottom;
    size_t caller_size;
#endif
};

fiber_t *fiber_running;
static uint64_t fiber_slice_ns = 1000000; /* 1 ms */
static size_t fiber_live;
static void *fiber_pool[FIBER_POOL_MAX];
static size_t fiber_pool_len;

typedef struct fiber_deferred {
    void (*fn)(void *p);
    void *p;
    struct fiber_deferred *next;
} fiber_deferred_t;
static fiber_deferred_t *fiber_deferred_head;

static void *fiber_stack_get(void)
{
    if (fiber_pool_len)
        return fiber_pool[--fiber_pool_len];
    void *s = mmap(NULL, FIBER_STACK_SIZE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (s == MAP_FAILED)
        return NULL;
    mprotect(s, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE); /* overflow faults, never corrupts */
    return s;
}

static void fiber_stack_put(void *s)
{
    if (fiber_pool_len < FIBER_POOL_MAX)
        fiber_pool[fiber_pool_len++] = s;
    else
        munmap(s, FIBER_STACK_SIZE);
}

static void fiber_run_deferred(void)
{
    while (fiber_live == 0 && fiber_deferred_head) {
        fiber_deferred_t *d = fiber_deferred_head;
        fiber_deferred_head = d->next;
        d->fn(d->p);
        bson_free(d);
    }
}

/* Saves the running context in `from` and resumes `to`. */
static void fiber_swap(fiber_ctx_t *from, fiber_ctx_t *to)
{
#ifdef FIBER_ASM_SWITCH
    fiber_swap_x86_64(from, *to);
#else
    swapcontext(from, to);
#endif
}

static void fiber_entry(void)
{
    fiber_t *f = fiber_running;
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(NULL, &f->caller_bottom, &f->caller_size);
#endif
    f->fn(f->arg);
    f->finished = true;
#ifdef FIBER_ASAN
    __sanitizer_start_switch_fiber(NULL, f->caller_bottom, f->caller_size);
#endif
    fiber_swap(&f->ctx, &f->caller); /* never comes back: a finished fiber is not resumed */
    __builtin_unreachable();
}

fiber_t *fiber_new(void (*fn)(void *arg), void *arg)
{
    void *stack = fiber_stack_get();
    if (!stack)
        return NULL;
    fiber_t *f = bson_malloc0(sizeof *f);
    f->fn = fn;
    f->arg = arg;
    f->stack = stack;
    f->created_ns = uv_hrtime();
    f->slice_ns = fiber_slice_ns;
#ifdef FIBER_ASM_SWITCH
    /* the first switch pops six zero registers and "returns" into
     * fiber_entry, with the stack aligned as after a call */
    uintptr_t *sp = (uintptr_t *)(((uintptr_t)stack + FIBER_STACK_SIZE) & ~(uintptr_t)15);
    *--sp = 0;                        /* fiber_entry's return address: none */
    *--sp = (uintptr_t)fiber_entry;
    for (int i = 0; i < 6; i++)
        *--sp = 0;
    f->ctx = sp;
#else
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = stack;
    f->ctx.uc_stack.ss_size = FIBER_STACK_SIZE;
    f->ctx.uc_link = &f->caller;
    makecontext(&f->ctx, fiber_entry, 0);
#endif
    return f;
}

bool fiber_resume(fiber_t *f)
{
    BSON_ASSERT(!fiber_running && !f->finished);
    fiber_running = f;
    f->started = true;
    f->slice_start_ns = uv_hrtime();
#ifdef FIBER_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->stack, FIBER_STACK_SIZE);
#endif
    fiber_swap(&f->caller, &f->ctx); /* until it yields or finishes */
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
    fiber_running = NULL;
    if (f->finished && f->counted) {
        f->counted = false;
        fiber_live--;
        fiber_run_deferred();
    }
    return f->finished;
}

void fiber_destroy(fiber_t *f)
{
    if (!f)
        return;
    BSON_ASSERT(f->finished || !f->started);
    fiber_stack_put(f->stack);
    bson_free(f);
}

fiber_t *fiber_current(void)
{
    return fiber_running;
}

void fiber_kill(fiber_t *f, int code, const char *msg)
{
    if (f->kill_code)
        return;
    f->kill_code = code;
    snprintf(f->kill_msg, sizeof f->kill_msg, "%s", msg);
}

void fiber_set_deadline(fiber_t *f, uint64_t deadline_ns)
{
    f->deadline_ns = deadline_ns;
}

bool fiber_killed(const fiber_t *f)
{
    return f->kill_code != 0;
}

uint64_t fiber_yields(const fiber_t *f)
{
    return f ? f->yields : 0;
}

uint64_t fiber_started_ns(const fiber_t *f)
{
    return f->created_ns;
}

void fiber_no_yield_begin(void)
{
    if (fiber_running)
        fiber_running->no_yield++;
}

void fiber_no_yield_end(void)
{
    if (fiber_running)
        fiber_running->no_yield--;
}

void fiber_set_slice_us(int64_t us)
{
    fiber_slice_ns = us <= 0 ? 0 : (uint64_t)us * 1000u;
}

int64_t fiber_slice_us(void)
{
    return (int64_t)(fiber_slice_ns / 1000u);
}

void fiber_set_slice(fiber_t *f, int64_t us)
{
    uint64_t ns = us <= 0 ? 0 : (uint64_t)us * 1000u;
    f->slice_ns = ns < fiber_slice_ns ? ns : fiber_slice_ns;
}

/* Fails when the fiber was killed or is past its deadline. */
static bool fiber_interrupted(fiber_t *f, uint64_t now, dberr_t *err)
{
    if (f->kill_code)
        return dberr_set(err, f->kill_code, "%s", f->kill_msg);
    if (f->deadline_ns && now >= f->deadline_ns)
        return dberr_set(err, DBERR_MAX_TIME_MS_EXPIRED, "operation exceeded time limit");
    return true;
}

bool fiber_due(void)
{
    fiber_t *f = fiber_running;
    if (!f)
        return false;
    if (f->kill_code)
        return true;
    uint64_t now = uv_hrtime();
    if (f->deadline_ns && now >= f->deadline_ns)
        return true;
    return f->no_yield == 0 && now - f->slice_start_ns >= f->slice_ns;
}

static bool fiber_yield(fiber_t *f, dberr_t *err);

bool fiber_check_slow(dberr_t *err)
{
    fiber_t *f = fiber_running;
    if (f->kill_code)
        return dberr_set(err, f->kill_code, "%s", f->kill_msg);
    if ((++f->ticks & (FIBER_CLOCK_EVERY - 1)) != 0)
        return true; /* reading the clock costs more than a cheap iteration */
    uint64_t now = uv_hrtime();
    if (!fiber_interrupted(f, now, err))
        return false;
    if (f->no_yield || now - f->slice_start_ns < f->slice_ns)
        return true;
    return fiber_yield(f, err);
}

bool fiber_alive_slow(dberr_t *err)
{
    fiber_t *f = fiber_running;
    if (f->kill_code)
        return dberr_set(err, f->kill_code, "%s", f->kill_msg);
    if ((++f->ticks & (FIBER_CLOCK_EVERY - 1)) != 0)
        return true;
    return fiber_interrupted(f, uv_hrtime(), err);
}

void fiber_tick(void)
{
    fiber_t *f = fiber_running;
    if (!f || f->no_yield || f->kill_code || uv_hrtime() - f->slice_start_ns < f->slice_ns)
        return;
    dberr_t ignored;
    fiber_yield(f, &ignored);
}

bool fiber_yield_now(dberr_t *err)
{
    fiber_t *f = fiber_running;
    if (!f)
        return true;
    if (!fiber_interrupted(f, uv_hrtime(), err))
        return false;
    return f->no_yield ? true : fiber_yield(f, err);
}

/* Back to the loop until resumed; then the kill and deadline checks. */
static bool fiber_yield(fiber_t *f, dberr_t *err)
{
    /* the slice is used up: back to the loop until resumed */
    f->yields++;
    if (!f->counted) {
        f->counted = true;
        fiber_live++;
    }
#ifdef FIBER_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->caller_bottom, f->caller_size);
#endif
    fiber_swap(&f->ctx, &f->caller);
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, &f->caller_bottom, &f->caller_size);
#endif
    return fiber_interrupted(f, uv_hrtime(), err);
}

void fiber_defer_free(void (*fn)(void *p), void *p)
{
    if (fiber_live == 0) {
        fn(p);
        return;
    }
    fiber_deferred_t *d = bson_malloc(sizeof *d);
    d->fn = fn;
    d->p = p;
    d->next = fiber_deferred_head;
    fiber_deferred_head = d;
}

size_t fiber_suspended(void)
{
    return fiber_live;
}
