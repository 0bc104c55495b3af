// null_fuse: a FUSE file system that keeps one flat directory of empty files in memory and
// answers every request at once, on one thread. What `metaops` measures on it is what the
// kernel's FUSE round trips alone cost on this machine: the floor under any FUSE file system's
// create, stat and unlink, before a single byte goes to a server (bench/mount/fuse_floor.sh,
// bench/RESULTS.md). Mounted with `default_permissions`, as `kelp mount` is, so the kernel
// sends the same requests per operation.
//
//   null_fuse MOUNTPOINT      (runs in the foreground until unmounted)
//
// Not a test and not a file system for anything else: no data, no subdirectories.
#define FUSE_USE_VERSION 34
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SLOTS (1u << 21)  // open addressing; plenty for the 10,000-100,000 files of a run

struct node {
  char *name;  // NULL: free; "" after an unlink (a tombstone, skipped by lookups)
  fuse_ino_t ino;
  mode_t mode;
};

static struct node nodes[SLOTS];
static struct node *by_ino[SLOTS];
static fuse_ino_t next_ino = 2;
static const double kTimeout = 1.0;

static unsigned hash(const char *s) {
  unsigned h = 2166136261u;
  while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
  return h;
}

static struct node *find(const char *name) {
  for (unsigned i = hash(name) & (SLOTS - 1);; i = (i + 1) & (SLOTS - 1)) {
    if (nodes[i].name == NULL) return NULL;
    if (strcmp(nodes[i].name, name) == 0) return &nodes[i];
  }
}

static struct node *add(const char *name, mode_t mode) {
  if (next_ino >= SLOTS) return NULL;
  unsigned i = hash(name) & (SLOTS - 1);
  while (nodes[i].name != NULL && nodes[i].name[0] != '\0') i = (i + 1) & (SLOTS - 1);
  free(nodes[i].name);
  nodes[i].name = strdup(name);
  nodes[i].ino = next_ino++;
  nodes[i].mode = mode;
  by_ino[nodes[i].ino] = &nodes[i];
  return &nodes[i];
}

static void fill(struct stat *st, fuse_ino_t ino, mode_t mode) {
  memset(st, 0, sizeof *st);
  st->st_ino = ino;
  st->st_mode = mode;
  st->st_nlink = S_ISDIR(mode) ? 2 : 1;
  st->st_uid = getuid();
  st->st_gid = getgid();
}

static int entry_of(fuse_ino_t parent, const char *name, struct fuse_entry_param *e) {
  if (parent != FUSE_ROOT_ID) return ENOTDIR;
  struct node *n = find(name);
  if (n == NULL || n->name[0] == '\0') return ENOENT;
  memset(e, 0, sizeof *e);
  e->ino = n->ino;
  e->attr_timeout = e->entry_timeout = kTimeout;
  fill(&e->attr, n->ino, n->mode);
  return 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  struct fuse_entry_param e;
  int err = entry_of(parent, name, &e);
  if (err == ENOENT) {  // a negative entry, cached like a positive one
    memset(&e, 0, sizeof e);
    e.entry_timeout = kTimeout;
    fuse_reply_entry(req, &e);
    return;
  }
  if (err != 0) fuse_reply_err(req, err);
  else fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)fi;
  struct stat st;
  if (ino == FUSE_ROOT_ID) {
    fill(&st, ino, S_IFDIR | 0777);
  } else if (ino < SLOTS && by_ino[ino] != NULL && by_ino[ino]->name[0] != '\0') {
    fill(&st, ino, by_ino[ino]->mode);
  } else {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_reply_attr(req, &st, kTimeout);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi) {
  (void)attr;
  (void)to_set;
  op_getattr(req, ino, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi) {
  struct fuse_entry_param e;
  if (entry_of(parent, name, &e) == 0) {
    if (fi->flags & O_EXCL) {
      fuse_reply_err(req, EEXIST);
      return;
    }
    fuse_reply_create(req, &e, fi);
    return;
  }
  if (parent != FUSE_ROOT_ID) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  struct node *n = add(name, S_IFREG | (mode & 07777));
  if (n == NULL) {
    fuse_reply_err(req, ENOSPC);
    return;
  }
  entry_of(parent, name, &e);
  fuse_reply_create(req, &e, fi);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
  struct node *n = parent == FUSE_ROOT_ID ? find(name) : NULL;
  if (n == NULL || n->name[0] == '\0') {
    fuse_reply_err(req, ENOENT);
    return;
  }
  by_ino[n->ino] = NULL;
  n->name[0] = '\0';
  fuse_reply_err(req, 0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)ino;
  fuse_reply_open(req, fi);
}

static void op_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)ino;
  (void)fi;
  fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops ops = {
    .lookup = op_lookup,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .unlink = op_unlink,
    .open = op_open,
    .flush = op_ok,
    .release = op_ok,
    .create = op_create,
};

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MOUNTPOINT\n", argv[0]);
    return 2;
  }
  char *fargv[] = {argv[0], "-o", "default_permissions,fsname=null_fuse", NULL};
  struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
  struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
  if (se == NULL) return 1;
  if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[1]) != 0) return 1;
  int rc = fuse_session_loop(se);
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return rc == 0 ? 0 : 1;
}
