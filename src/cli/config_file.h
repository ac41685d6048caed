/*
 * Writing another program's config file on the user's behalf (`corral launch`): the old
 * contents copied to a backup first, the new ones put in place atomically (a temporary file
 * in the same directory, synced, renamed over the old one) so that the program never reads a
 * half-written file, and the file's permissions kept.
 */
#ifndef CORRAL_CLI_CONFIG_FILE_H
#define CORRAL_CLI_CONFIG_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"

#define CONFIG_FILE_BACKUPS_KEPT 5 /* per file: older backups are removed */

/*
 * Replace path's contents with data (len bytes). When path exists with other contents it is
 * first copied to backup_dir/<file name>.<unix seconds> (backup_dir created as needed; the
 * oldest beyond CONFIG_FILE_BACKUPS_KEPT removed) and backup_path (if not NULL) gets that
 * copy's path, else it is made empty; a NULL backup_dir (for a file of Corral's own) keeps no
 * copy. Same contents: nothing is written, and *changed (if not
 * NULL) says whether anything was. A new file gets mode 0600 (it may hold an API key); an
 * existing one keeps its mode. false with err.
 */
bool config_file_replace(const char *path, const char *data, size_t len, const char *backup_dir,
                         char *backup_path, size_t backup_size, bool *changed,
                         corral_error *err);

#endif
