using Microsoft.Azure.WebJobs;
using Microsoft.Azure.WebJobs.Extensions.DurableTask;

namespace ExtHost;

/// <summary>The `--smoke` run: one C# orchestration and one activity on the real extension, nothing of the app.</summary>
public static class SmokeFunctions
{
    [FunctionName("SmokeOrchestrator")]
    public static async Task<string> SmokeOrchestrator([OrchestrationTrigger] IDurableOrchestrationContext context)
    {
        var a = await context.CallActivityAsync<string>("SmokeActivity", "a");
        var b = await context.CallActivityAsync<string>("SmokeActivity", "b");
        return a + b;
    }

    [FunctionName("SmokeActivity")]
    public static string SmokeActivity([ActivityTrigger] string input) => input.ToUpperInvariant();

    /// <summary>Started by hand (JobHost.CallAsync): starts the orchestration and waits for its end.</summary>
    [NoAutomaticTrigger]
    [FunctionName("SmokeStart")]
    public static async Task SmokeStart([DurableClient] IDurableOrchestrationClient client, [DurableClient] string clientPayload, string instanceId)
    {
        // What a Node.js function's durableClient input receives (the extension's BindingHelper).
        Console.WriteLine($"SMOKE durableClient payload={clientPayload}");
        await client.StartNewAsync("SmokeOrchestrator", instanceId, (object?)null);
        var deadline = DateTime.UtcNow.AddSeconds(60);
        while (DateTime.UtcNow < deadline)
        {
            var status = await client.GetStatusAsync(instanceId);
            if (status?.RuntimeStatus is OrchestrationRuntimeStatus.Completed or OrchestrationRuntimeStatus.Failed)
            {
                Console.WriteLine($"SMOKE {instanceId} {status.RuntimeStatus} output={status.Output}");
                return;
            }
            await Task.Delay(250);
        }
        throw new TimeoutException($"smoke orchestration {instanceId} did not finish in 60 s");
    }
}
