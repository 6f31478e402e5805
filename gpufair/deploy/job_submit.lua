--[[
gpufair hard control mode: jobs submitted to a managed partition arrive HELD
(priority 0) and carry the admin comment "gpufair:managed". Slurm's own
scheduler never starts a held job, so only the jobs gpufair releases (after
pinning them to the nodes its policy picked) run: there is no window in which
Slurm could start a job gpufair did not choose.

A hold set at submission is a *user* hold (Reason=JobHeldUser), which the job's
owner could lift with `scontrol release`, running the job outside the policy
(or undoing a preemption). slurm_job_modify therefore refuses any change of a
managed job's priority (release, hold, nice-free priority updates) unless it
comes from root or SlurmUser: only gpufair (running as one of them) releases.
The admin comment that marks the job cannot be changed by users at all.

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
-- job_desc.priority when an update leaves the priority alone
local NO_VAL = 4294967294

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

function slurm_job_submit(job_desc, part_list, submit_uid)
   if managed(job_desc.partition) then
      if unmodelled(job_desc.features) then
         slurm.log_info("gpufair: constraint %s left to Slurm", job_desc.features)
         return slurm.SUCCESS
      end
      job_desc.priority = 0
      job_desc.admin_comment = MARK
      -- gpufair rewrites the required nodes when it pins a job: keep the user's own list
      if job_desc.req_nodes ~= nil and job_desc.req_nodes ~= "" then
         job_desc.admin_comment = MARK .. " nodelist=" .. job_desc.req_nodes
      end
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   local comment = job_rec.admin_comment or ""
   if string.sub(comment, 1, #MARK) == MARK and not OPERATORS[modify_uid]
      and job_desc.priority ~= nil and job_desc.priority ~= NO_VAL then
      slurm.log_info("gpufair: uid %d may not change the priority of managed job %d",
                     modify_uid, job_rec.job_id)
      slurm.log_user("gpufair schedules this job: it is started and held by gpufair, " ..
                     "not by scontrol release/hold (scancel it to withdraw it)")
      return slurm.ESLURM_ACCESS_DENIED
   end
   return slurm.SUCCESS
end

slurm.log_info("gpufair job_submit.lua loaded")
return slurm.SUCCESS
