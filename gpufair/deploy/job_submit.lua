--[[
gpufair hard control mode: jobs submitted to a managed partition arrive HELD
(priority 0) and carry the admin comment "gpufair:managed". Slurm's own
scheduler never starts a held job, so only the jobs gpufair releases (after
pinning them to the nodes its policy picked) run: there is no window in which
Slurm could start a job gpufair did not choose.

A hold set at submission is a *user* hold (Reason=JobHeldUser), which the job's
owner could lift with `scontrol release`, running the job outside the policy
(or undoing a preemption). slurm_job_modify therefore refuses any change of a
managed job's priority (release, nice-free priority updates) unless it comes
from root or SlurmUser: only gpufair (running as one of them) releases.
The admin comment that marks the job cannot be changed by users at all.

The owner's own hold (`sbatch --hold`/`-H`, or `scontrol hold`/`uhold` of a
waiting job) is honoured: it is recorded as the word "gpufair:userhold" in the
job's comment, and gpufair starts no job that carries it. The owner's
`scontrol release` of such a job only takes the word out: the job stays held
(priority 0) and becomes gpufair's to start. The word lives in the comment, not
in the admin comment, because Slurm refuses a user's update that changes the
admin comment even when this script makes the change ("Attempt to change
admin_comment"); a user who edits the comment keeps the word as it was, and the
mark only ever stops gpufair from starting the owner's own job, never lets Slurm
start it. An operator may clear it with `scontrol update JobId=N Comment=...`.

Slurm refuses a comment longer than 1,024 bytes (the whole sbatch fails, "Pathname or file
name too long"). When the owner's comment leaves no room for the word, a hold set at
submission puts it in the admin comment instead ("gpufair:managed gpufair:userhold"),
which users cannot forge; it counts only while the comment leaves no room. The user's comment
is kept as they wrote it. Since no user's update may change the admin comment, the owner's
release of such a job is refused until they shorten the comment (their update of a held
job's comment then carries the word into it), and so is a hold (or a longer comment) that
would need the word where there is no room.

Install: copy next to slurm.conf as job_submit.lua and set
    JobSubmitPlugins=lua
(`gpufair admin write-files` writes a copy with SLURM_USER_UID filled in to
/usr/local/share/gpufair/job_submit.lua; docs/deploy.md)
Edit MANAGED to list the partitions gpufair controls (the same list as
[slurm] managed_partitions in gpufair.toml). A job without -p goes to the
default partition, named in DEFAULT_PARTITION.
]]

local MANAGED = { gpu = true }
local DEFAULT_PARTITION = "gpu"
local MARK = "gpufair:managed"
-- uids allowed to hold/release managed jobs: root and SlurmUser (set SLURM_USER_UID
-- to SlurmUser's uid when it is not root; gpufair serve runs as one of them)
local OPERATORS = { [0] = true }
local SLURM_USER_UID = nil
if SLURM_USER_UID then OPERATORS[SLURM_USER_UID] = true end
-- job_desc.priority when an update leaves the priority alone; what scontrol release sends
local NO_VAL = 4294967294
local RELEASE = 4294967295
-- the owner's hold, in the job's comment (see above)
local USER_HOLD = "gpufair:userhold"
-- job_rec.job_state of a waiting job (JOB_PENDING, below the flag bits)
local PENDING = 0
-- the longest comment Slurm accepts, in bytes
local COMMENT_MAX = 1024
-- truncated at each managed submission: gpufair serve notices its time at once instead of
-- at its next poll (<hook_dir>/submitted; `gpufair admin write-files` writes a site's
-- hook_dir here). A failure to open it is ignored
local SUBMIT_STAMP = "/var/spool/gpufair/submitted"

local function stamp_submission()
   local file = io.open(SUBMIT_STAMP, "w")
   if file then file:close() end
end

local function user_held(comment)
   for word in string.gmatch(comment or "", "%S+") do
      if word == USER_HOLD then return true end
   end
   return false
end

-- `comment` without the mark wherever the user typed it, and with it at the end when held
-- (a comment without the mark that is to stay without it is left exactly as it is)
local function marked(comment, held)
   local text = comment or ""
   if user_held(text) then
      text = string.gsub(" " .. text .. " ", "(%s)" .. USER_HOLD .. "%f[%s]", "%1")
      text = string.gsub(string.gsub(text, "^%s+", ""), "%s+$", "")
   end
   if held then
      text = (text == "" and USER_HOLD) or (text .. " " .. USER_HOLD)
   end
   return text
end

-- whether `comment` (without the mark) leaves room to add the mark
local function room(comment)
   local text = marked(comment, false)
   return text == "" or #text + 1 + #USER_HOLD <= COMMENT_MAX
end

-- the owner's hold of a job: the mark in its comment, or in its admin comment while the
-- comment leaves no room for it (see above)
local function owner_held(comment, admin_comment)
   return user_held(comment) or (user_held(admin_comment) and not room(comment))
end

-- set the comment of a submission or update to `text` unless it already is that.
-- Slurm's lua ignores an empty string (the old comment, mark and all, would stay): " "
local function set_comment(job_desc, current, text)
   if text ~= (current or "") then
      job_desc.comment = (text == "" and " ") or text
   end
end

local function managed(partition)
   local name = partition
   if name == nil or name == "" then name = DEFAULT_PARTITION end
   -- a job may name several partitions ("gpu,urgent"): managed if any is
   for part in string.gmatch(name, "[^,]+") do
      if MANAGED[part] then return true end
   end
   return false
end

-- a --constraint with alternatives, counts or brackets is more than gpufair's model of a
-- placement (a set of allowed nodes): such a job is left to Slurm's own scheduler, unheld
local function unmodelled(features)
   return features ~= nil and string.find(features, "[|%[%]%*!]") ~= nil
end

-- a job that runs in a reservation (--reservation) runs on the reservation's nodes in its
-- window, which its owners gave to those who may use it: Slurm's to schedule, left unheld
-- (gpufair offers nobody the nodes of an active reservation)
local function reserved(reservation)
   return reservation ~= nil and reservation ~= ""
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   if managed(job_desc.partition) then
      if unmodelled(job_desc.features) then
         slurm.log_info("gpufair: constraint %s left to Slurm", job_desc.features)
         return slurm.SUCCESS
      end
      if reserved(job_desc.reservation) then
         slurm.log_info("gpufair: job in reservation %s left to Slurm", job_desc.reservation)
         return slurm.SUCCESS
      end
      -- sbatch --hold (-H) submits priority 0, any other submission NO_VAL
      local held = job_desc.priority == 0
      local admin = MARK
      if held and not room(job_desc.comment) then
         admin = MARK .. " " .. USER_HOLD      -- no room in the comment: see above
         held = false
      end
      set_comment(job_desc, job_desc.comment, marked(job_desc.comment, held))
      job_desc.priority = 0
      -- gpufair rewrites the required nodes when it pins a job: keep the user's own list
      if job_desc.req_nodes ~= nil and job_desc.req_nodes ~= "" then
         admin = admin .. " nodelist=" .. job_desc.req_nodes
      end
      job_desc.admin_comment = admin
      stamp_submission()
   end
   return slurm.SUCCESS
end

local function refuse(job_rec, modify_uid, why)
   slurm.log_info("gpufair: uid %d may not change the priority of managed job %d",
                  modify_uid, job_rec.job_id)
   slurm.log_user(why)
   return slurm.ESLURM_ACCESS_DENIED
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   local comment = job_rec.admin_comment or ""
   if string.sub(comment, 1, #MARK) ~= MARK or OPERATORS[modify_uid] then
      return slurm.SUCCESS
   end
   local held = owner_held(job_rec.comment, job_rec.admin_comment)
   local priority = job_desc.priority
   if priority ~= nil and priority ~= NO_VAL then
      local owner = job_rec.user_id == modify_uid
      local waiting = job_rec.job_state % 256 == PENDING
      if owner and waiting and priority == 0 then
         held = true                  -- scontrol hold/uhold: the owner's hold
      elseif owner and waiting and held and priority == RELEASE then
         held = false                 -- scontrol release: the job is gpufair's again...
         job_desc.priority = 0        -- ...and stays held until gpufair starts it
      else
         return refuse(job_rec, modify_uid,
                       "gpufair schedules this job: it is started and held by gpufair, " ..
                       "not by scontrol release/hold (scancel it to withdraw it; " ..
                       "scontrol hold of a waiting job and release of that hold are yours)")
      end
   end
   local text = job_desc.comment or job_rec.comment
   if not room(text) and held ~= user_held(job_rec.admin_comment) then
      -- the mark would have to go where there is no room, or out of the admin comment
      return refuse(job_rec, modify_uid,
                    "gpufair keeps the hold of this job in its admin comment while the " ..
                    "comment leaves no room for the word " .. USER_HOLD .. ": shorten the " ..
                    "comment to at most " .. (COMMENT_MAX - 1 - #USER_HOLD) .. " bytes " ..
                    "(scontrol update JobId=" .. job_rec.job_id .. " Comment=...), then " ..
                    "hold or release it")
   end
   set_comment(job_desc, text, marked(text, held and room(text)))
   return slurm.SUCCESS
end

slurm.log_info("gpufair job_submit.lua loaded")
return slurm.SUCCESS
