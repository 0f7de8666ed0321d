// The engine's runtime directory, pid file and log, made so that another
// user cannot redirect or read them: a directory that exists already must
// be ours and closed to group and others (the socket in it is the door to
// every application's memory), and files are opened without following
// symbolic links (a link planted in the directory cannot make the engine
// truncate a file of its choice).
#pragma once

#include <string>

#include "common/status.h"

namespace rocemu {

// Creates `dir` (mode 0700) or checks the one there: a directory, not a
// symbolic link, owned by this user, no group or other access.
Status ensure_private_dir(const std::string& dir);

// Opens (creating, mode 0600) `path` for writing, never through a symbolic
// link; the file must be a regular one of this user. Returns the fd.
Result<int> open_private_file(const std::string& path, bool truncate);

// Writes `text` as the whole content of `path` (opened as above).
Status write_private_file(const std::string& path, const std::string& text);

}  // namespace rocemu
