/*
 * A tiny JSON reader for the fake vendor libraries (libnvidia-ml, libdcmi): enough for our own node
 * files and control files, nothing more. Header-only with static functions, so each fake stays one
 * translation unit and exports nothing of it. The includer provides <stdlib.h>, <string.h>, <stdio.h>.
 */
#ifndef HCS_FAKE_JSON_H
#define HCS_FAKE_JSON_H

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jv {
    jtype t;
    int b;
    double d;
    long long i;
    int is_int;
    char *s;
    size_t n;
    struct jv *items;
    char **keys;
} jv;

typedef struct {
    const char *p;
    const char *start;
    const char *end;
    const char *err;
} jparser;

static void jfree(jv *v) {
    if (!v) return;
    free(v->s);
    for (size_t k = 0; k < v->n; k++) {
        jfree(&v->items[k]);
        if (v->keys) free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    memset(v, 0, sizeof(*v));
}

static void jskip(jparser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t')) ps->p++;
}

static int jfail(jparser *ps, const char *msg) {
    if (!ps->err) ps->err = msg;
    return 0;
}

static char *jparse_string(jparser *ps) {
    if (ps->p >= ps->end || *ps->p != '"') {
        jfail(ps, "expected string");
        return NULL;
    }
    ps->p++;
    size_t cap = 16, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    while (ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\') {
            if (ps->p >= ps->end) break;
            char e = *ps->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {
                unsigned code = 0;
                for (int k = 0; k < 4; k++) {
                    if (ps->p >= ps->end) break;
                    char h = *ps->p++;
                    code <<= 4;
                    if (h >= '0' && h <= '9') code |= (unsigned)(h - '0');
                    else if (h >= 'a' && h <= 'f') code |= (unsigned)(h - 'a' + 10);
                    else if (h >= 'A' && h <= 'F') code |= (unsigned)(h - 'A' + 10);
                }
                c = code < 0x80 ? (char)code : '?';
                break;
            }
            default: c = e; break;
            }
        }
        if (len + 2 > cap) {
            cap *= 2;
            char *grown = realloc(out, cap);
            if (!grown) {
                free(out);
                return NULL;
            }
            out = grown;
        }
        out[len++] = c;
    }
    if (ps->p >= ps->end) {
        free(out);
        jfail(ps, "unterminated string");
        return NULL;
    }
    ps->p++;
    out[len] = '\0';
    return out;
}

static int jparse_value(jparser *ps, jv *out, int depth);

static int jpush(jv *arr, size_t *cap, jv *item, char *key) {
    if (arr->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        jv *items = realloc(arr->items, ncap * sizeof(jv));
        if (!items) return 0;
        arr->items = items;
        if (arr->t == J_OBJ) {
            char **keys = realloc(arr->keys, ncap * sizeof(char *));
            if (!keys) return 0;
            arr->keys = keys;
        }
        *cap = ncap;
    }
    arr->items[arr->n] = *item;
    if (arr->t == J_OBJ) arr->keys[arr->n] = key;
    arr->n++;
    return 1;
}

static int jparse_container(jparser *ps, jv *out, int depth, int is_obj) {
    size_t cap = 0;
    out->t = is_obj ? J_OBJ : J_ARR;
    ps->p++;
    jskip(ps);
    char close = is_obj ? '}' : ']';
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return 1;
    }
    for (;;) {
        char *key = NULL;
        jskip(ps);
        if (is_obj) {
            key = jparse_string(ps);
            if (!key) return 0;
            jskip(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                return jfail(ps, "expected ':'");
            }
            ps->p++;
        }
        jv item;
        memset(&item, 0, sizeof(item));
        if (!jparse_value(ps, &item, depth + 1) || !jpush(out, &cap, &item, key)) {
            jfree(&item);
            free(key);
            return 0;
        }
        jskip(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return 1;
        }
        return jfail(ps, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int jparse_value(jparser *ps, jv *out, int depth) {
    memset(out, 0, sizeof(*out));
    if (depth > 32) return jfail(ps, "nested too deep");
    jskip(ps);
    if (ps->p >= ps->end) return jfail(ps, "unexpected end");
    char c = *ps->p;
    if (c == '{' || c == '[') return jparse_container(ps, out, depth, c == '{');
    if (c == '"') {
        out->t = J_STR;
        out->s = jparse_string(ps);
        return out->s != NULL;
    }
    size_t left = (size_t)(ps->end - ps->p);
    if (left >= 4 && strncmp(ps->p, "true", 4) == 0) {
        out->t = J_BOOL;
        out->b = 1;
        ps->p += 4;
        return 1;
    }
    if (left >= 5 && strncmp(ps->p, "false", 5) == 0) {
        out->t = J_BOOL;
        ps->p += 5;
        return 1;
    }
    if (left >= 4 && strncmp(ps->p, "null", 4) == 0) {
        out->t = J_NULL;
        ps->p += 4;
        return 1;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t len = 0;
        int is_int = 1;
        while (ps->p < ps->end && len < sizeof(buf) - 1 &&
               strchr("+-0123456789.eE", *ps->p) != NULL) {
            if (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E') is_int = 0;
            buf[len++] = *ps->p++;
        }
        buf[len] = '\0';
        out->t = J_NUM;
        out->is_int = is_int;
        out->d = strtod(buf, NULL);
        out->i = is_int ? strtoll(buf, NULL, 10) : (long long)out->d;
        return 1;
    }
    return jfail(ps, "unexpected character");
}

static int jparse_text(const char *text, size_t len, jv *out, const char **err, size_t *at) {
    jparser ps = {text, text, text + len, NULL};
    if (jparse_value(&ps, out, 0)) {
        jskip(&ps);
        if (ps.p == ps.end) return 1;
        jfail(&ps, "trailing characters");
    }
    jfree(out);
    *err = ps.err ? ps.err : "out of memory";
    *at = (size_t)(ps.p - ps.start);
    return 0;
}

static const jv *jget(const jv *o, const char *key) {
    if (!o || o->t != J_OBJ) return NULL;
    for (size_t k = 0; k < o->n; k++)
        if (strcmp(o->keys[k], key) == 0) return &o->items[k];
    return NULL;
}

/* Numbers may also be written as strings, so that hex ids ("0x233010de") stay readable. */
static int jas_int(const jv *v, long long *out) {
    if (!v) return 0;
    if (v->t == J_NUM) {
        *out = v->is_int ? v->i : (long long)v->d;
        return 1;
    }
    if (v->t == J_BOOL) {
        *out = v->b;
        return 1;
    }
    if (v->t == J_STR && v->s[0]) {
        char *end = NULL;
        errno = 0;
        unsigned long long x = strtoull(v->s, &end, 0);
        if (errno == 0 && end && *end == '\0') {
            *out = (long long)x;
            return 1;
        }
    }
    return 0;
}

static long long jint(const jv *o, const char *key, long long dflt) {
    long long v;
    return jas_int(jget(o, key), &v) ? v : dflt;
}

static const char *jstr(const jv *o, const char *key, const char *dflt) {
    const jv *v = jget(o, key);
    return (v && v->t == J_STR) ? v->s : dflt;
}

static size_t jlen(const jv *v) { return (v && (v->t == J_ARR || v->t == J_OBJ)) ? v->n : 0; }

#endif /* HCS_FAKE_JSON_H */
