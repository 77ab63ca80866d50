using System.Runtime.ExceptionServices;
using Microsoft.Azure.WebJobs;
using Microsoft.Azure.WebJobs.Host.Timers;
using Microsoft.Extensions.Hosting;

namespace ExtHost;

/// <summary>
/// What happens when a function outlives host.json's <c>functionTimeout</c>, or an error escapes the
/// WebJobs SDK. The SDK's default handler stops the JobHost and rethrows on a thread of its own,
/// which left this process up but serving nothing (test/e2e/functionTimeout.test.ts showed it). The
/// Functions host fails the timed-out call and restarts the language worker, and goes on serving;
/// this host fails the call (the SDK already did, with FunctionTimeoutException) and goes on
/// serving, without restarting the worker: the timed-out code runs on there until it ends, as on the
/// development host. An unhandled error stops the whole host with exit code 1, loudly.
/// </summary>
sealed class TimeoutHandler(IHostApplicationLifetime lifetime) : IWebJobsExceptionHandler
{
    public void Initialize(JobHost host)
    {
    }

    public Task OnTimeoutExceptionAsync(ExceptionDispatchInfo exceptionInfo, TimeSpan timeoutGracePeriod)
    {
        Console.Error.WriteLine(
            $"exthost: {exceptionInfo.SourceException.Message}: the call failed; the Functions host would restart the language worker here, exthost keeps it (the timed-out code runs on until it ends)");
        return Task.CompletedTask;
    }

    public Task OnUnhandledExceptionAsync(ExceptionDispatchInfo exceptionInfo)
    {
        Console.Error.WriteLine($"exthost: unhandled error, stopping the host: {exceptionInfo.SourceException}");
        Environment.ExitCode = 1;
        lifetime.StopApplication();
        return Task.CompletedTask;
    }
}
