namespace Microsoft.Azure.WebJobs.Script.Workers.Rpc;

/// <summary>
/// A function threw in the worker. Named and worded as the Functions host's own RpcException
/// ("Result: Failure\nException: ...\nStack: ..."), because both are visible to the app: the Durable
/// extension parses this text (OutOfProcExceptionHelpers) to find an orchestrator's
/// `$OutOfProcData$` state and an activity's friendly message, and serializes the exception, class
/// name included, into a failed activity's details, which the orchestrator's error carries. (The
/// assembly name in that serialization is ExtHost's, not Microsoft.Azure.WebJobs.Script's.)
/// </summary>
public sealed class RpcException(string message, string? stack)
    : Exception($"Result: Failure\nException: {message}\nStack: {stack}");
