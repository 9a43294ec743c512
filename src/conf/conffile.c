/* conffile: reads a mongod.conf YAML file with libyaml and hands each
 * scalar to options_set_path under its dotted key ("net.port"), so the
 * file and the command line share one table of settings (options.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "conf/options.h"

#define CONFFILE_MAX_DEPTH 8

static bool conffile_node(options_t *o, yaml_document_t *doc, yaml_node_t *node, const char *path,
                          const char *file, int depth, dberr_t *err);

static bool conffile_mapping(options_t *o, yaml_document_t *doc, yaml_node_t *node,
                             const char *prefix, const char *file, int depth, dberr_t *err)
{
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *key = yaml_document_get_node(doc, p->key);
        yaml_node_t *value = yaml_document_get_node(doc, p->value);
        if (!key || key->type != YAML_SCALAR_NODE)
            return dberr_set(err, DBERR_BAD_VALUE, "%s:%zu: a key must be a plain name", file,
                             key ? key->start_mark.line + 1 : 0);
        char path[512];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "",
                 (const char *)key->data.scalar.value);
        /* a key given twice: the second would silently win */
        for (yaml_node_pair_t *q = node->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *k2 = yaml_document_get_node(doc, q->key);
            if (k2 && k2->type == YAML_SCALAR_NODE &&
                strcmp((const char *)k2->data.scalar.value,
                       (const char *)key->data.scalar.value) == 0)
                return dberr_set(err, DBERR_BAD_VALUE, "%s:%zu: '%s' is given twice", file,
                                 key->start_mark.line + 1, path);
        }
        if (!value || !conffile_node(o, doc, value, path, file, depth + 1, err))
            return false;
    }
    return true;
}

static bool conffile_node(options_t *o, yaml_document_t *doc, yaml_node_t *node, const char *path,
                          const char *file, int depth, dberr_t *err)
{
    if (depth > CONFFILE_MAX_DEPTH)
        return dberr_set(err, DBERR_BAD_VALUE, "%s: '%s' is nested too deeply", file, path);
    switch (node->type) {
    case YAML_MAPPING_NODE:
        return conffile_mapping(o, doc, node, path, file, depth, err);
    case YAML_SEQUENCE_NODE:
        return dberr_set(err, DBERR_BAD_VALUE, "%s:%zu: '%s' must be a single value, not a list",
                         file, node->start_mark.line + 1, path);
    case YAML_SCALAR_NODE: {
        const char *v = (const char *)node->data.scalar.value;
        if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
            (!*v || strcmp(v, "~") == 0 || strcmp(v, "null") == 0))
            return dberr_set(err, DBERR_BAD_VALUE, "%s:%zu: '%s' has no value", file,
                             node->start_mark.line + 1, path);
        return options_set_path(o, path, v, file, err);
    }
    default:
        return dberr_set(err, DBERR_BAD_VALUE, "%s: '%s' is empty", file, path);
    }
}

bool options_load_file(options_t *o, const char *path, dberr_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return dberr_set(err, DBERR_BAD_VALUE, "cannot read config file %s: %s", path,
                         strerror(errno));
    yaml_parser_t parser;
    yaml_document_t doc;
    bool ok = false;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return dberr_set(err, DBERR_INTERNAL_ERROR, "cannot start the YAML parser");
    }
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc)) {
        dberr_set(err, DBERR_BAD_VALUE, "%s:%zu:%zu: not valid YAML: %s", path,
                  parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                  parser.problem ? parser.problem : "parse error");
        goto cleanup_parser;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        ok = true; /* an empty file sets nothing */
    } else if (root->type != YAML_MAPPING_NODE) {
        dberr_set(err, DBERR_BAD_VALUE, "%s: the file must be a mapping of settings "
                                        "(net:, storage:, …)",
                  path);
    } else {
        ok = conffile_mapping(o, &doc, root, "", path, 0, err);
    }
    yaml_document_delete(&doc);
cleanup_parser:
    yaml_parser_delete(&parser);
    fclose(f);
    return ok;
}
