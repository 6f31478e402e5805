--[[
gpufair hard control mode: jobs submitted to a managed partition arrive HELD
(priority 0) and carry the admin comment "gpufair:managed". Slurm's own
scheduler never starts a held job, so only the jobs gpufair releases (after
pinning them to the nodes its policy picked) run: there is no window in which
Slurm could start a job gpufair did not choose.

Install: copy next to slurm.conf as job_submit.lua and set
    JobSubmitPlugins=lua
Edit MANAGED to list the partitions gpufair controls (the same list as
[slurm] managed_partitions in gpufair.toml). A job without -p goes to the
default partition, named in DEFAULT_PARTITION.
]]

local MANAGED = { gpu = true }
local DEFAULT_PARTITION = "gpu"
local MARK = "gpufair:managed"

local function managed(partition)
   local name = partition
   if name == nil or name == "" then name = DEFAULT_PARTITION end
   -- a job may name several partitions ("gpu,urgent"): managed if any is
   for part in string.gmatch(name, "[^,]+") do
      if MANAGED[part] then return true end
   end
   return false
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   if managed(job_desc.partition) then
      job_desc.priority = 0
      job_desc.admin_comment = MARK
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end

slurm.log_info("gpufair job_submit.lua loaded")
return slurm.SUCCESS
