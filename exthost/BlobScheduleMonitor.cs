using Azure;
using Azure.Storage.Blobs;
using Microsoft.Azure.WebJobs.Extensions.Timers;
using Newtonsoft.Json;

namespace ExtHost;

/// <summary>
/// The timer schedule status (`isPastDue`, `scheduleStatus`), kept where the Functions host keeps it:
/// blob `azure-webjobs-hosts/timers/{hostId}/{timerName}/status`, JSON { Last, Next, LastUpdated }.
/// Ours because the timers extension served here (Microsoft.Azure.WebJobs.Extensions 3.0.6) builds
/// its StorageScheduleMonitor on Microsoft.Azure.WebJobs.Host.Storage 3.x, a type of which
/// (DistributedLockManagerContainerProvider) is gone from the 5.x the queue extension needs.
/// The past-due check is the base class's (the extension's own).
/// </summary>
public sealed class BlobScheduleMonitor(string connectionString, string hostId) : ScheduleMonitor
{
    readonly BlobContainerClient container = new BlobServiceClient(connectionString).GetBlobContainerClient("azure-webjobs-hosts");
    bool created;

    BlobClient Blob(string timerName) => container.GetBlobClient($"timers/{hostId}/{timerName}/status");

    public override async Task<ScheduleStatus> GetStatusAsync(string timerName)
    {
        try
        {
            var content = await Blob(timerName).DownloadContentAsync().ConfigureAwait(false);
            return JsonConvert.DeserializeObject<ScheduleStatus>(content.Value.Content.ToString())!;
        }
        catch (RequestFailedException e) when (e.Status == 404)
        {
            return null!;
        }
    }

    public override async Task UpdateStatusAsync(string timerName, ScheduleStatus status)
    {
        if (!created)
        {
            await container.CreateIfNotExistsAsync().ConfigureAwait(false);
            created = true;
        }
        await Blob(timerName).UploadAsync(BinaryData.FromString(JsonConvert.SerializeObject(status)), overwrite: true).ConfigureAwait(false);
    }
}
